# Asked by the harness (the start-up history's environment) (run with -I -B): which
# distributions does this interpreter have installed? Prints one tagged JSON line, the
# sorted `name==version` list; standard library only.
import importlib.metadata
import json

seen = set()
for dist in importlib.metadata.distributions():
    name = (dist.metadata["Name"] or "").strip().lower().replace("_", "-")
    if name:
        seen.add(name + "==" + (dist.version or ""))
print("COLDSTART_PACKAGES " + json.dumps(sorted(seen)))
