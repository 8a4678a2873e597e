# test_claims.py: the claims' verdict sentences (claims.verdict) and the kind each
# verdict is counted as in the Claims reading (claims.verdict_kind), on every form the
# claim functions write; the fixtures' verdicts are tested through TABLES.md in
# test_tables.py.
import unittest

from stridebench import claims


def row(**keys):
    return dict(keys)


class VerdictTest(unittest.TestCase):
    def test_all_or_none(self):
        self.assertEqual(claims.verdict(["a", "b"], [True, True]), "holds")
        self.assertEqual(claims.verdict(["a", "b"], [False, False]), "does not hold")

    def test_a_size_threshold_either_way(self):
        runs = [row(size="1024"), row(size="65536"), row(size="1048576")]
        self.assertEqual(claims.verdict(["s", "m", "l"], [False, True, True], runs), "holds from 64.0 KiB up, not below")
        self.assertEqual(claims.verdict(["s", "m", "l"], [True, True, False], runs), "holds up to 64.0 KiB, not above")
        # no threshold separates them: the count, and which pass
        self.assertEqual(claims.verdict(["s", "m", "l"], [True, False, True], runs), "holds in 2 of 3 cases: s, l")

    def test_the_key_that_splits_them(self):
        runs = [row(threads="1", layout="sliced"), row(threads="2", layout="sliced")]
        self.assertEqual(claims.verdict(["a", "b"], [True, False], runs), "holds on 1 thread, not on 2 threads")
        runs = [row(layout="sliced"), row(layout="transposed"), row(layout="channels_last")]
        v = claims.verdict(["a", "b", "c"], [True, False, False], runs)
        self.assertTrue(v.startswith("holds for the sliced layout, not for the "), v)
        self.assertTrue(v.endswith(" layouts"), v)
        self.assertIn("transposed", v)
        self.assertIn("channels_last", v)

    def test_many_cases_name_none(self):
        labels = ["a", "b", "c", "d", "e"]
        self.assertEqual(claims.verdict(labels, [True, True, True, True, False]), "holds in 4 of 5 cases")


class VerdictKindTest(unittest.TestCase):
    def test_every_form(self):
        cases = {
            "holds": "holds",
            "does not hold": "does not hold",
            claims.NM: claims.NM,
            "holds (1 of 2 cases noisy)": "holds",
            "holds: views allocate nothing; contiguous() and clone() allocate": "holds",
            "holds as PyTorch defines it: views allocate nothing; reshape of a transposed tensor copies": "holds",
            # M5: the crossover the claim names is a full hold; its three ways of failing are not
            "holds (caching wins from 64.0 KiB)": "holds",
            "does not hold: the caching allocator is faster at every size": "does not hold",
            "does not hold: plain allocation is faster at every size": "does not hold",
            "does not hold: no small-to-large crossover": "does not hold",
            # in part: a threshold, a splitting key, a count
            "holds from 64.0 MiB up, not below": "holds in part",
            "holds up to 64.0 KiB, not above": "holds in part",
            "holds on 1 thread, not on 2 threads": "holds in part",
            "holds in 3 of 4 cases (1 of 4 cases noisy)": "holds in part",
            # per-group verdicts (decide_per): each group's own kind
            "cpu: holds; cuda:0: holds": "holds",
            "cpu: does not hold; cuda:0: does not hold: no small-to-large crossover": "does not hold",
            "cpu: holds; cuda:0: does not hold": "holds in part",
            "1 thread: holds (caching wins from 4.0 KiB); 2 threads: holds": "holds",
        }
        for v, kind in cases.items():
            self.assertEqual(claims.verdict_kind(v), kind, v)


if __name__ == "__main__":
    unittest.main()
