import { conformance } from './suite.ts';
import { twoProcessPlane, twoProcessStoragePlane } from './planes.ts';

conformance('Dispatch on one file shared by two processes', twoProcessPlane, { storagePlane: twoProcessStoragePlane });
