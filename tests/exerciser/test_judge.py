"""exerciser.judge: the judge's verdicts on made-up runs (judge.py), one per rule."""
import unittest

import judge

INITIAL = {"old": b"0123456789"}


class Run:
    def __init__(self, results, files, status=0, loud=()):
        self.results, self.files, self.status, self.loud = results, files, status, set(loud)

    def loud_at(self, index):
        return index in self.loud


OPS = ["open 0 old r+", "pwrite 0 1 5"]
LOCAL = Run(["0 0", "1 0"], {"old": b"01234A6789"})


def verdict(plain, lib, refusing_named=False):
    return judge.judge(OPS, LOCAL, plain, lib, lambda n: INITIAL if n < 2 else LOCAL.files, refusing_named)


class JudgeTest(unittest.TestCase):
    def test_identical(self):
        self.assertEqual(verdict(LOCAL, LOCAL), ("identical", None))

    def test_loud_refusal_where_the_store_fails_too(self):
        plain = Run(["0 0", "-1 95"], INITIAL)
        self.assertEqual(verdict(plain, Run(["0 0", "-1 95"], INITIAL, loud=[1])), ("loud", "pwrite"))

    def test_worse_than_without(self):
        lib = Run(["0 0", "-1 95"], INITIAL, loud=[1])
        self.assertEqual(verdict(LOCAL, lib), ("worse", "pwrite"))
        self.assertEqual(verdict(LOCAL, lib, refusing_named=True), ("loud", "pwrite"))

    def test_as_without_and_quiet(self):
        plain = Run(["0 0", "-1 29"], INITIAL)
        self.assertEqual(verdict(plain, plain), ("as-without", None))
        self.assertEqual(verdict(plain, Run(["0 0", "-1 5"], INITIAL)), ("quiet", "pwrite"))

    def test_wrong_bytes(self):
        plain = Run(["0 0", "-1 29"], INITIAL)
        self.assertEqual(verdict(plain, Run(["0 0", "1 0"], {"old": b"X"})), ("destroyed", "final"))
        self.assertEqual(verdict(plain, Run(["0 0", "1 0"], {"old": b"0123456789A"})), ("wrong", "final"))

    def test_hang_crash_leftover(self):
        plain = Run(["0 0", "-1 29"], INITIAL)
        self.assertEqual(verdict(plain, Run(["0 0"], INITIAL, status="timeout")), ("hang", "pwrite"))
        self.assertEqual(verdict(plain, Run(["0 0"], INITIAL, status=-7)), ("crash", "pwrite"))
        self.assertEqual(verdict(Run(["0 0"], INITIAL, status=-7), Run(["0 0"], INITIAL, status=-7)),
                         ("as-without", None))
        lib = Run(["0 0", "-1 95"], dict(INITIAL, spool=b""), loud=[1])
        self.assertEqual(verdict(plain, lib), ("leftover", "pwrite"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
