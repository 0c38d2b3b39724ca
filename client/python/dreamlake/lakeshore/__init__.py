"""`dreamlake.lakeshore`: the dispatch contract's import name for the `lakeshore` package, so code
written against the contract (`from dreamlake.lakeshore import HttpDispatch, run_worker`) runs
unchanged. It is the same module, not a copy: classes and errors are the same objects (its
submodules too, `dreamlake.lakeshore.frames` is `lakeshore.frames`). `dreamlake` is a namespace
package (no __init__.py), so it can sit beside other `dreamlake.*` distributions."""
import sys

import lakeshore as _lakeshore

for _name, _module in list(sys.modules.items()):
    if _name.startswith("lakeshore."):
        sys.modules["dreamlake." + _name] = _module
sys.modules[__name__] = _lakeshore
