# SPDX-License-Identifier: Apache-2.0
# The startup session's Python display probe (hosted/cells.c,
# ph_prove_session), run as a cell: one display output whose text says
# which of matplotlib and pandas the sandbox's Python finds ("1" or "0"
# each); that it comes back at all proves the display channel.
import builtins
import importlib.util

builtins.display({"text/plain": "".join("1" if importlib.util.find_spec(m) else "0"
                                        for m in ("matplotlib", "pandas"))}, raw=True)
