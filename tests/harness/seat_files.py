"""The file protocol a test drives a seat through.

A test drops commands as DIR/NAME.cmd.N and reads answers from
DIR/NAME.res.N; every file is written whole (a temporary name, then a
rename), so a reader never sees half of one.
"""
import json
import os

import anyio


def write_json(p: str, value) -> None:
    """Writes `value` as JSON to `p` whole: a temporary name, then a rename."""
    with open(p + ".tmp", "w") as f:
        json.dump(value, f)
    os.rename(p + ".tmp", p)


class SeatFiles:
    def __init__(self, folder: str, name: str):
        self.folder = folder
        self.name = name

    def path(self, suffix: str) -> str:
        return os.path.join(self.folder, f"{self.name}.{suffix}")

    def write(self, suffix: str, value) -> None:
        write_json(self.path(suffix), value)

    async def serve(self, answer, poll: float = 0.05) -> None:
        """The command loop: waits for each NAME.cmd.N in turn, hands its JSON
        to `answer(n, command)` and writes what that returns to NAME.res.N.
        Runs until cancelled."""
        n = 0
        while True:
            cmd = self.path(f"cmd.{n}")
            if not os.path.exists(cmd):
                await anyio.sleep(poll)
                continue
            with open(cmd) as f:
                command = json.load(f)
            self.write(f"res.{n}", await answer(n, command))
            n += 1
