"""``belief decide``'s figures rendered in a second process while the first one decides.

Importing matplotlib and the plots (≈ 0.5 s) and drawing the figures (≈ 0.4 s) took a third of
a warm ``belief decide``; in one process they cannot overlap with reading the belief and
computing CVU (imports and drawing hold the GIL).  The command therefore starts this worker
first (:class:`FigureWorker`); the worker imports matplotlib (Agg) and writes the figures the
belief alone determines (:func:`belief.report.document.belief_figures`): copied from the figure
cache (:mod:`belief.report.figure_cache`) when it holds this belief file's, else drawn from the
same belief file, loaded here, and stored there.  Its standard input then brings two pickled
messages: ``{"gate": Dataset or None, "belief": belief_view(fitted) or None}`` — the feasible
set and the safety gate, sent before CVU is computed (``gains`` and ``safety``,
:func:`belief.report.document.feasibility_figures`, are drawn while the parent computes
CVU), and what the decision's figures read of the belief, so that a worker served by the cache
never reads the belief file — and ``{"decision": Dataset}``; it draws the figures of the
decision's values (:func:`belief.report.document.value_figures`, and ``gains``/``safety`` from
the decision when no gate came first) and lists the file stems it wrote
(``figures.json``, with the warnings belief's code raised meanwhile, which the parent issues
again; its standard error goes to ``worker.log``, both in its folder).  The PNGs
are the ones the in-process path draws (the same functions and ``savefig`` arguments).

The worker writes only into a temporary folder its parent made and removes (and into the
figure cache, whose entries are written whole, see :mod:`belief.report.figure_cache`; on a
cache hit its ``load`` warnings are the parent's alone); the parent copies
the files into its :class:`belief.files.OutputSet` (committed with the decision's tables as one
unit).  When the worker fails for any reason (it cannot start, the decision cannot be sent,
it exits with an error, it times out, it lists a file it did not write) the parent draws the
figures itself, so a worker
failure costs time, never a figure; when the parent fails (bad input, Ctrl-C) it kills the
worker, and nothing is written (a parent killed outright leaves the worker without a
decision: it removes its folder and exits).  On a one-core machine the command draws in-process
(a second process would only compete with CVU).

Run as ``python -P -m belief.report.figure_worker BELIEF FOLDER [CANDIDATES]``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from belief.report.png import DPI, save_png

__all__ = ["DPI", "FigureWorker", "belief_view", "main", "save_png"]

_LOG, _NAMES = "worker.log", "figures.json"  # the worker's standard error and its answer


class FigureWorker:
    """The figure process of one ``belief decide`` (module docstring).

    Use :meth:`start` before the belief is read, :meth:`send_early` with the feasible set
    (before CVU; optional), :meth:`send` as soon as the decision is made,
    :meth:`finish` to wait for the figures, and :meth:`close` in a ``finally`` (it kills a
    worker that is still running and removes its folder).  :meth:`disabled` is a worker that
    never runs (one core: a second process would only compete with CVU).
    """

    def __init__(self, proc: subprocess.Popen | None, folder: str | None) -> None:
        self.proc = proc
        self.folder = folder
        self.error: str | None = None
        self._sender: Any = None
        self._queue: Any = None  # messages for the writer thread
        self._sent = False

    @classmethod
    def disabled(cls) -> FigureWorker:
        """A worker that does not run: :meth:`finish` returns None without an error."""
        return cls(None, None)

    @classmethod
    def start(cls, belief: str, candidates: str | None) -> FigureWorker:
        """Start ``python -P -m belief.report.figure_worker`` on ``belief`` (and
        ``candidates``, as ``belief decide --candidates`` gives it), importing from the
        parent's ``sys.path`` (``-P``: not from the current folder).  A worker that cannot
        start is recorded in :attr:`error`; :meth:`finish` then returns None."""
        try:
            folder = tempfile.mkdtemp(prefix="belief-figures-")
        except OSError as exc:
            worker = cls(None, None)
            worker.error = f"the figure worker has no folder: {exc}"
            return worker
        cmd = [sys.executable, "-P", "-m", "belief.report.figure_worker", str(belief), folder]
        if candidates is not None:
            cmd.append(str(candidates))
        env = {**os.environ, "MPLBACKEND": "Agg",
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            with open(os.path.join(folder, _LOG), "wb") as log:
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=log, env=env)
        except OSError as exc:
            worker = cls(None, folder)
            worker.error = f"the figure worker did not start: {exc}"
            return worker
        return cls(proc, folder)

    def send_early(self, gate: Any, fitted: Any) -> None:
        """Hand the worker the feasible set and the gate (``gate``,
        :func:`belief.decision.engine.gate_view`) and what the decision's figures read of
        ``fitted`` (:func:`belief_view`) before the decision is made: it draws ``gains`` and
        ``safety`` while CVU runs.  Returns at once; called at most once, before :meth:`send`
        (a later call does nothing)."""
        if self.proc is None or self._queue is not None:
            return
        self._post(lambda: {"gate": gate, "belief": belief_view(fitted)}, "feasible set")

    def send(self, decision: Any, fitted: Any = None) -> None:
        """Hand ``decision`` to the worker and return at once (a thread writes it to the
        worker's standard input and closes it), so the caller writes its tables meanwhile.
        With ``fitted`` (the belief the decision was made on) and no :meth:`send_early`, what
        the decision's figures read of it goes along (:func:`belief_view`), so that a worker
        whose belief figures came from the cache need not read the belief file.  A decision
        that cannot be sent stops the worker (:attr:`error` says why)."""
        if self.proc is None or self._sent:
            return
        if self._queue is None:
            self._post(lambda: {"gate": None,
                                "belief": None if fitted is None else belief_view(fitted)},
                       "belief's figure data")
        self._post(lambda: {"decision": decision}, "decision")
        if self.proc is not None:
            self._sent = True
            self._queue.put(None)  # then close the worker's standard input

    def _post(self, message: Any, what: str) -> None:
        """Build (``message()``) and pickle a message here and queue it for the writer thread
        (started on the first message), which writes the messages to the worker's standard
        input in order.  Any failure stops the worker (:attr:`error` names ``what``): the
        parent then draws in-process."""
        if self.proc is None:
            return
        try:
            data = pickle.dumps(message())
            if self._queue is None:
                import queue
                import threading

                self._queue = queue.Queue()
                stdin, items = self.proc.stdin, self._queue

                def write() -> None:
                    try:
                        while (item := items.get()) is not None:
                            stdin.write(item)
                            stdin.flush()
                        stdin.close()
                    except (OSError, ValueError):  # a worker that died or was stopped
                        pass

                self._sender = threading.Thread(target=write, name="belief-figure-send",
                                                daemon=True)
                self._sender.start()
        except Exception as exc:  # any failure here means: draw in-process
            self.error = f"the {what} could not be sent to the figure worker: {exc}"
            self._stop()
            return
        self._queue.put(data)

    def finish(self, decision: Any, timeout: float = 120.0,
               fitted: Any = None) -> dict[str, str] | None:
        """Send ``decision`` (and ``fitted``, unless :meth:`send` did) and wait at most
        ``timeout`` seconds
        for the figures: {stem: PNG path} in the order of
        :func:`belief.report.document.decision_figures`, or None when the worker failed
        (:attr:`error` says why) or is :meth:`disabled`.  The warnings the worker recorded
        while reading the belief or drawing are issued again here (same class when it can be
        imported, else ``UserWarning``)."""
        if self.proc is None:
            return None
        self.send(decision, fitted)
        if self.proc is None:  # send() failed
            return None
        deadline = time.monotonic() + timeout
        self._sender.join(timeout)
        try:
            code = self.proc.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            self.error = f"the figure worker did not finish in {timeout:g} s"
            return None
        folder = Path(self.folder)
        if code != 0:
            last = (folder / _LOG).read_text("utf-8", "replace").strip().splitlines()
            self.error = (f"the figure worker exited with {code}"
                          + (f": {last[-1]}" if last else ""))
            return None
        try:
            answer = json.loads((folder / _NAMES).read_text("utf-8"))
            paths = {str(n): str(folder / f"{n}.png") for n in answer["figures"]}
            recorded = [(str(m), str(c), str(t)) for m, c, t in answer["warnings"]]
        except (OSError, ValueError, TypeError, KeyError):
            self.error = "the figure worker's answer could not be read"
            return None
        if not all(Path(p).is_file() for p in paths.values()):
            self.error = "the figure worker listed a figure it did not write"
            return None
        _warn_again(recorded)
        return paths
    def _stop(self) -> None:
        if self._queue is not None:
            self._queue.put(None)  # the writer thread ends (its pipe is closed below)
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            self.proc = None

    def close(self) -> None:
        """Kill the worker if it still runs and remove its folder."""
        self._stop()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def _warn_again(recorded: list[tuple[str, str, str]]) -> None:
    """Issue the worker's (module, class name, message) warnings in this process."""
    import importlib
    import warnings

    for module, name, message in recorded:
        try:
            category = getattr(importlib.import_module(module), name)
            if not (isinstance(category, type) and issubclass(category, Warning)):
                category = UserWarning
        except (ImportError, AttributeError):
            category = UserWarning
        warnings.warn(message, category, stacklevel=3)


def main(argv: list[str] | None = None) -> int:
    """The worker: ``BELIEF FOLDER [CANDIDATES]`` (module docstring).  Exit 0 with
    ``FOLDER/figures.json`` = {"figures": stems in order, "warnings": [(module, class,
    message)] of the warnings raised by belief's own code}; 3, after removing ``FOLDER``,
    when the parent sent no decision (it gave up or was killed)."""
    import warnings

    args = sys.argv[1:] if argv is None else argv
    belief, folder = args[0], args[1]
    candidates = args[2] if len(args) > 2 else None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from belief.report.document import feasibility_figures, figure_order, value_figures
    from belief.workflow.belief_file import load

    written: list[str] = []

    def save(figs: dict[str, Any]) -> None:
        for name, fig in figs.items():
            save_png(fig, os.path.join(folder, f"{name}.png"))
            plt.close(fig)
            written.append(name)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted, replayed = _belief_figures(belief, candidates, folder, save, written)
        after = len(caught)
        try:
            first = pickle.load(sys.stdin.buffer)  # {"gate": …, "belief": …}
            if fitted is None:  # the belief figures came from the cache
                fitted = (SimpleNamespace(**first["belief"]) if first["belief"] is not None
                          else load(belief, candidates))
            if first["gate"] is not None:  # drawn while the parent computes CVU
                save(feasibility_figures(fitted, first["gate"]))
            decision = pickle.load(sys.stdin.buffer)["decision"]
        except (EOFError, pickle.UnpicklingError):  # no decision: the parent gave up or died
            shutil.rmtree(folder, ignore_errors=True)
            return 3
        if first["gate"] is None:
            save(feasibility_figures(fitted, decision))
        save(value_figures(fitted, decision))
    # one entry per distinct warning, in order (the parent shows each once)
    own = list(dict.fromkeys(_own(caught[:after]) + replayed + _own(caught[after:])))
    with open(os.path.join(folder, _NAMES), "w", encoding="utf-8") as fh:
        json.dump({"figures": figure_order(written), "warnings": own}, fh)
    return 0


def _own(ws: list[Any]) -> list[tuple[str, str, str]]:
    """The warnings of belief's own code among the recorded ``ws``, as (module, class name,
    message)."""
    return [(w.category.__module__, w.category.__qualname__, str(w.message)) for w in ws
            if w.category.__module__.split(".")[0] in ("belief", "models")]


def belief_view(fitted: Any) -> dict[str, Any]:
    """What :func:`belief.report.document.decision_only_figures` reads of a fitted belief:
    its ``gain`` draws (and ``cost``, when q_t has them), ``policy`` and ``step``."""
    keep = [v for v in ("gain", "cost") if v in fitted.belief]
    return {"belief": fitted.belief[keep], "policy": fitted.policy, "step": fitted.step}


def _belief_figures(belief: str, candidates: str | None, folder: str, save: Any,
                    written: list[str]) -> tuple[Any, list[tuple[str, str, str]]]:
    """The figures the belief alone determines into ``folder``: copied from the figure cache
    (:mod:`belief.report.figure_cache`) when it holds this belief file's, else drawn
    (``save``) from the belief, loaded here, and stored there.  Returns (the loaded belief, or
    None when the figures came from the cache; the warnings a cached drawing raised, to be
    passed on as if raised now — a drawing's own warnings are raised as it draws)."""
    from belief.report import figure_cache
    from belief.report.document import belief_figures
    from belief.workflow.belief_file import load

    def stamp() -> tuple | None:
        """What tells a changed file: the belief's and the candidates' (size, mtime, inode)."""
        try:
            return tuple((st.st_size, st.st_mtime_ns, st.st_ino)
                         for st in (os.stat(p) for p in (belief, candidates) if p is not None))
        except OSError:
            return None

    key, before = None, stamp()
    if figure_cache.cache_dir() is not None:
        try:
            key = figure_cache.figure_key(belief, DPI, candidates)
        except OSError:  # an unreadable file fails in load(), not here
            key = None
    hit = figure_cache.lookup(key) if key is not None else None
    if hit is not None:
        for name, png in hit.figures.items():
            Path(folder, f"{name}.png").write_bytes(png)
            written.append(name)
        return None, list(hit.warnings)
    import warnings

    fitted = load(belief, candidates)
    with warnings.catch_warnings(record=True) as drawn:
        warnings.simplefilter("always")
        figs = belief_figures(fitted)
        save(figs)
    for w in drawn:  # raised again for the caller's record, and remembered with the figures
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if key is not None and before is not None and stamp() == before:  # not a file replaced
        figure_cache.store(key, {n: Path(folder, f"{n}.png").read_bytes() for n in figs},
                           _own(drawn))
    return fitted, []


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # skip the interpreter's teardown of matplotlib, xarray and pandas (≈ 0.2 s the parent
    # would wait for): every file is written and closed
    os._exit(code)
