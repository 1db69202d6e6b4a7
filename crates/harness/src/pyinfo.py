# Asked by the harness (bench, the environment record) (run with -I -B): what is this interpreter?
# Prints one tagged JSON line; standard library only.
import json
import sys
import sysconfig

print(
    "COLDSTART_PYINFO "
    + json.dumps(
        {
            "executable": sys.executable,
            "version": ".".join(str(p) for p in sys.version_info[:3])
            + ("" if sys.version_info.releaselevel == "final" else sys.version_info.releaselevel),
            "implementation": sys.implementation.name,
            "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        }
    )
)
