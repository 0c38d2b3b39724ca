import { conformance } from './suite.ts';
import { PYTHON_LACKS, pythonPlane, pythonStoragePlane } from './python-plane.ts';

conformance('the Python local plane (sqlite3), through a JSON-lines bridge', pythonPlane, {
  lacks: PYTHON_LACKS,
  storagePlane: pythonStoragePlane,
});
