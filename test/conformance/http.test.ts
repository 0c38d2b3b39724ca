import { conformance } from './suite.ts';
import { httpPlane } from './planes.ts';

conformance('HttpDispatch against wrangler dev', httpPlane);
