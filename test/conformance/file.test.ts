import { conformance } from './suite.ts';
import { twoProcessPlane } from './planes.ts';

conformance('Dispatch on one file shared by two processes', twoProcessPlane);
