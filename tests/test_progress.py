"""Progress of long work: done/total, elapsed and ETA as a line per update on a non-terminal stderr
and in the log file; under papermill it reaches papermill's standard error (the terminal of
``make book``) and never the executed notebook."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dobrushin.store.progress import Progress


def test_lines_and_log(tmp_path, capfd):
    log = tmp_path / "nb" / "progress.log"
    with Progress(10, "nb: model [pretrained]", log=log) as p:
        p.update(4)
        p.update(6, note="done")
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("nb: model [pretrained]  4/10 inputs (40%)  elapsed ")
    assert "ETA " in err[0] and err[1].endswith("done") and "10/10" in err[1]
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and lines[1].endswith(err[1])
    q = Progress(0, "train x", unit="epochs", terminal=False)
    q.update(3)
    assert q.line() .startswith("train x  3 epochs  elapsed")
    assert capfd.readouterr().err == ""  # terminal=False: nothing on stderr


def test_papermill_keeps_progress_out_of_the_notebook(tmp_path):
    pm = Path(sys.executable).with_name("papermill")
    if not pm.exists():
        pytest.skip("papermill is not installed")
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": ["from dobrushin.store.progress import Progress\n",
                                "p = Progress(2, 'chapter: model [pretrained]', log='progress.log')\n",
                                "p.update(1); p.update(1)\n", "print('cell output')\n"]}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    src, out = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    src.write_text(json.dumps(nb))
    env = dict(os.environ, TQDM_DISABLE="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1] / "lib"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([str(pm), "--log-level", "WARNING", "--no-progress-bar", "-k", "python3", "--cwd", str(tmp_path),
                        str(src), str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "chapter: model [pretrained]  2/2 inputs" in r.stderr  # on papermill's stderr: the terminal
    outputs = json.dumps(json.loads(out.read_text())["cells"][0]["outputs"])
    assert "cell output" in outputs and "chapter: model" not in outputs and "ETA" not in outputs
    assert "2/2 inputs" in (tmp_path / "progress.log").read_text()
