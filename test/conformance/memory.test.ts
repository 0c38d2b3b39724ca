import { conformance } from './suite.ts';
import { memoryPlane } from './planes.ts';

conformance('Dispatch(":memory:")', memoryPlane);
