"""At import, before the harness has run anything: writes a passing record to every pipe it
holds and exits at once, as a module's top-level code can."""
import json
import os
import stat

fake = json.dumps({"ok": True, "stage": "backward", "class_name": "Forged", "output_shapes": [[1]], "params": 1}) + "\n"
for fd in range(3, 64):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, fake.encode())
    except OSError:
        continue
os._exit(0)
