"""The same per-commit series handed to two other change detectors, for
`cargo xtask bench-history`: asv's step detector (asv.step_detect, as
`asv publish` and `asv find` use it) and Apache Otava's E-Divisive means
with a t-test (otava.analysis.compute_change_points, what its `analyze`
command runs on a CSV column), each with its defaults.

Reads {"series": [float, ...]} on stdin; prints
{"asv": [index, ...], "otava": [index, ...]}: the first index of each new
level found.
"""

import json
import sys

import asv.step_detect
import otava.analysis

series = json.load(sys.stdin)["series"]
steps = asv.step_detect.detect_steps(series)
asv_found = [int(left) for (left, _right, _v, _m, _e) in steps[1:]]
points, _weak = otava.analysis.compute_change_points(series)
otava_found = sorted(int(p.index) for p in points)
json.dump({"asv": asv_found, "otava": otava_found}, sys.stdout)
