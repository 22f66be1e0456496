"""The generations' record: what a later session needs to go on, kept in a folder meant for git.

``<lineage_dir>/initial.safetensors`` is generation 0's parent (a copy of the shipped file, or a
seeded random network on a board without one). For each finished generation ``g``:

- ``gen-<g>.json``: its seed and settings (self-play, training, gate), the parent file's sha256,
  positions, wall time, held-out loss, the gate's decision with W/D/L and Elo interval, the
  chained Elo of the best after it, the positions trained on so far;
- ``gen-<g>.safetensors``: its candidate evaluation (kept whether promoted or not: a few tens of
  KB; its metadata ties it to the run, generation and parent);
- ``gen-<g>-gate.pdn``: the games of its gate, the players named ``candidate`` and ``best``;
- the check from unseen openings, in the record.

The best evaluation is the newest promoted candidate, else the initial file. Resuming reads only
this folder: positions lost with a machine are played again from the recorded seed and parent.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from game import nneval

INITIAL = "initial.safetensors"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def weights_digest(path: Path) -> str:
    """sha256 of an evaluation file's weights (board, scale, tensors in name order): the same
    for the same weights, whatever order the file's header lists them in."""
    net = nneval.load(path)
    h = hashlib.sha256(f"{net.size}:{net.output_scale}".encode())
    for name in sorted(net.tensors):
        h.update(name.encode() + net.tensors[name].tobytes())
    return h.hexdigest()


class Lineage:
    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)

    def record_path(self, g: int) -> Path:
        return self.folder / f"gen-{g:03d}.json"

    def gate_pdn_path(self, g: int) -> Path:
        """The games of generation ``g``'s gate (its lost ones are worth reading)."""
        return self.folder / f"gen-{g:03d}-gate.pdn"

    def candidate_path(self, g: int) -> Path:
        return self.folder / f"gen-{g:03d}.safetensors"

    @property
    def initial_path(self) -> Path:
        return self.folder / INITIAL

    def records(self) -> list[dict[str, Any]]:
        out = []
        g = 0
        while self.record_path(g).is_file():
            path = self.record_path(g)
            try:
                out.append(json.loads(path.read_text()))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: not a generation record ({e})") from None
            g += 1
        return out

    def next_generation(self) -> int:
        return len(self.records())

    def ensure_initial(self, make: Any) -> Path:
        """The initial file, written by ``make(path)`` the first time."""
        if not self.initial_path.is_file():
            self.folder.mkdir(parents=True, exist_ok=True)
            make(self.initial_path)
        nneval.load(self.initial_path)  # checked: a damaged file is refused by name
        return self.initial_path

    def best_before(self, g: int) -> Path:
        """The evaluation that plays generation ``g``'s games: the newest candidate promoted
        before it, else the initial file."""
        best = self.initial_path
        for rec in self.records()[:g]:
            if rec.get("promoted"):
                best = self.candidate_path(int(rec["generation"]))
        return best

    def best_elo_before(self, g: int) -> float:
        recs = self.records()[:g]
        return float(recs[-1]["best_elo"]) if recs else 0.0

    def positions_before(self, g: int) -> int:
        return sum(int(r["positions"]) for r in self.records()[:g])

    def write(self, g: int, record: dict[str, Any], candidate: bytes) -> None:
        """The candidate file, then its record (the record's presence marks it finished)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for path, data in (
            (self.candidate_path(g), candidate),
            (self.record_path(g), (json.dumps(record, indent=1, sort_keys=True) + "\n").encode()),
        ):
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
