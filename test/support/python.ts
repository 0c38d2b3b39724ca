/**
 * The Python the tests run: $LAKESHORE_PYTHON (scripts/test.mjs sets it), else the toolchain's venv
 * with the package's optional extras (scripts/toolchain.mjs ensurePython), else python3.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const venv = join(import.meta.dirname, '..', '..', '.toolchain', 'python', 'bin', 'python');
export const PYTHON = process.env.LAKESHORE_PYTHON ?? (existsSync(venv) ? venv : 'python3');
