"""The exerciser's judge: one sequence's run with the library against the local run (the reference) and the
run on the same store without the library.

Verdicts (what the run with the library did):
  identical   every call returned what it returned locally and the files hold the local bytes
  loud        the first call that differs failed, an `appendguard:` line came with it, and every file that
              existed before the sequence keeps its bytes
  as-without  it differs from the local run exactly as the store does without the library (the store's
              own behaviour, which the library leaves alone)
  worse       the store without the library equals the local run, the store with it does not
  quiet       the first call that differs failed without an `appendguard:` line (and not as without)
  wrong       the first call that differs succeeded with another result, or every call matched and the
              files differ (and not as without)
  destroyed   a file that existed before holds neither its bytes (or them with more after) nor what the
              local run or the run without the library left there
  leftover    a file is left that neither the local run nor the run without the library leaves
  crash       the driver died (a signal, or an exit status other than 0)
  hang        the driver did not finish within the sequence's time bound

    verdict, first = judge(ops, local, plain, lib, files_after)    # runs: Run objects (exercise.py)

files_after(n) gives the files of the local run after its first n operations: what the files held when the
first differing call was made. With refusing_named=True (a pattern that names the files: the program says
they are on an append-only store) a loud refusal is a pass even where the store takes the call.
"""
PASSING = ("identical", "loud", "as-without")
FAILING = ("worse", "quiet", "wrong", "destroyed", "leftover", "crash", "hang")
VERDICTS = PASSING + FAILING


def first_difference(a, b):
    """Index of the first result line that differs (a missing line differs), or None."""
    for i in range(max(len(a), len(b))):
        if i >= len(a) or i >= len(b) or a[i] != b[i]:
            return i
    return None


def same_run(a, b):
    return a.status == 0 and b.status == 0 and a.results == b.results and a.files == b.files


def failed(line):
    return line is not None and line.split()[0] == "-1"


def kept_bytes(name, states, lib, references):
    """A file keeps the bytes it had before the sequence or when the first differing call was made (perhaps
    with more after), or it holds what a reference run left."""
    now = lib.files.get(name)
    if any(name not in before or now is not None and now.startswith(before[name]) for before in states):
        return True
    return any(now == ref.files.get(name) for ref in references)


def operation_name(ops, index):
    if index is None or index >= len(ops):
        return "final"
    return ops[index].split()[0].rstrip("!")


def judge(ops, local, plain, lib, files_after, refusing_named=False):
    """(verdict, name of the first differing operation or "final")."""
    if lib.status != 0:
        if plain.status == lib.status and plain.results == lib.results:
            return "as-without", None  # the store hangs or kills the driver by itself
        return ("hang" if lib.status == "timeout" else "crash"), operation_name(ops, len(lib.results))
    if same_run(lib, local):
        return "identical", None
    first = first_difference(lib.results, local.results)
    name = operation_name(ops, first)
    references = [local] + ([plain] if plain.status == 0 else [])
    states = (files_after(0), files_after(len(ops) if first is None else first))
    if any(not kept_bytes(f, states, lib, references) for f in states[0]):
        return "destroyed", name
    loud = first is not None and failed(lib.results[first]) and lib.loud_at(first)
    if same_run(plain, local) and not (loud and refusing_named):
        return "worse", name
    if set(lib.files) - set(local.files) - set(plain.files):
        return "leftover", name
    if loud:
        return "loud", name
    if same_run(lib, plain):
        return "as-without", None
    if first is not None and failed(lib.results[first]):
        return "quiet", name
    return "wrong", name
