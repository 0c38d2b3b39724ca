import { conformance } from './suite.ts';
import { PYTHON_LACKS, pythonPlane } from './python-plane.ts';

conformance('the Python local plane (sqlite3), through a JSON-lines bridge', pythonPlane, PYTHON_LACKS);
