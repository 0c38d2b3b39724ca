import { conformance } from './suite.ts';
import { httpPlane, httpStoragePlane } from './planes.ts';

// Boltzmann's statistics take 600 claims here, not 2,000: a claim is a round trip, and the SQL
// that samples is the one every plane runs (2,000 each on the three local targets).
conformance('HttpDispatch against wrangler dev', httpPlane, { statClaims: 600, storagePlane: httpStoragePlane });
