import { conformance } from './suite.ts';
import { memoryPlane, memoryStoragePlane } from './planes.ts';

conformance('Dispatch(":memory:")', memoryPlane, { storagePlane: memoryStoragePlane });
