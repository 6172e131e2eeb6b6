# SPDX-License-Identifier: Apache-2.0
# The step that reads the guest's uid (hosted/proofproject.c, ph_proof_uid).
import os
print(os.getuid())
