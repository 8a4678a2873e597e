# test_main.py: `python3 -m stridebench` (scripts/stridebench/__main__.py): the tool list
# from the top of a clone, the dispatch to each tool, and Note [A Python that has what
# the tool needs].
import os
import subprocess
import sys
import unittest

import sbtest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = ("run", "tables", "compare", "plot", "collect", "recheck", "abtest", "peers", "check-comments")


def python_m(*args, env=None):
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SB_PYTHON_CHOSEN")}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "stridebench", *args], cwd=ROOT, capture_output=True,
                          text=True, env=e, timeout=120)


class MainTest(unittest.TestCase):
    def test_help_lists_every_tool_from_the_top_of_a_clone(self):
        p = python_m("--help")
        self.assertEqual(p.returncode, 0, p.stderr)
        for tool in TOOLS:
            self.assertRegex(p.stdout, rf"\n  {tool} +\S")

    def test_no_tool_or_an_unknown_one_is_an_error(self):
        p = python_m()
        self.assertEqual(p.returncode, 2)
        p = python_m("tabels")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no tool 'tabels'", p.stderr)

    def test_each_entry_point_reaches_its_tool(self):
        for script in ("tables", "compare", "recheck", "abtest", "collect", "check_comments"):
            p = sbtest.run(script, "--help")
            self.assertEqual(p.returncode, 0, (script, p.stderr))
            self.assertRegex(p.stdout, rf"^usage: (scripts/)?{script} ", script)
        p = python_m("check-comments")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_a_tool_reruns_under_a_python_that_has_its_modules(self):
        # -S: this interpreter without site-packages, as a pyenv or venv Python without
        # Debian's packages would be; /usr/bin/python3 (when it has scipy) takes over
        has = subprocess.run(["/usr/bin/python3", "-c", "import scipy"], capture_output=True).returncode == 0 \
            if os.path.exists("/usr/bin/python3") else False
        if not has:
            self.skipTest("/usr/bin/python3 without scipy: nothing to hand over to")
        p = subprocess.run([sys.executable, "-S", os.path.join(ROOT, "scripts", "compare"), "--help"],
                           capture_output=True, text=True, timeout=120,
                           env={k: v for k, v in os.environ.items() if k != "SB_PYTHON_CHOSEN"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("compare runs under /usr/bin/python3", p.stderr)
        self.assertIn("cannot import scipy", p.stderr)
        self.assertIn("usage: compare", p.stdout)
        # once only: a second hand-over is never attempted
        p = subprocess.run([sys.executable, "-S", os.path.join(ROOT, "scripts", "compare"), "--help"],
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, SB_PYTHON_CHOSEN="/usr/bin/python3"))
        self.assertNotIn("runs under", p.stderr)


if __name__ == "__main__":
    unittest.main()
