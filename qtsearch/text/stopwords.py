"""English stop-words: the words BM25 does not index or search for.

Function words and question/frame words ("what is the", "who", "how do") match most rows and
say nothing about the topic, so they must not decide a hit. The list is the common NLTK /
Snowball English list (179 words) with contractions split the way qtsearch cuts words ("don't"
is "don" + "t"), plus a few frame words of everyday questions. "won" (from "won't") and "may"
stay words: "he won the Nobel Prize", the month of May.
"""

from __future__ import annotations

_LIST = """
a about above after again against ain all am an and any are aren as at
be because been before being below between both but by
can couldn
d did didn do does doesn doing don down during
each
few for from further
had hadn has hasn have haven having he her here hers herself him himself his how
i if in into is isn it its itself
just
ll
m ma me mightn more most mustn my myself
needn no nor not now
o of off on once only or other our ours ourselves out over own
re
s same shan she should shouldn so some such
t than that the their theirs them themselves then there these they this those through to
too
under until up
ve very
was wasn we were weren what when where which while who whom why will with wouldn
y you your yours yourself yourselves
also could might must shall would whose
"""
STOP_WORDS: frozenset[str] = frozenset(_LIST.split())
