"""The file protocol shared by the test harnesses that drive a seat.

A test drops commands as DIR/NAME.cmd.N and reads answers from
DIR/NAME.res.N; every file is written whole (a temporary name, then a
rename), so a reader never sees half of one.
"""
import json
import os


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
