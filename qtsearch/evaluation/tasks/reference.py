"""Published figures printed beside measured ones, for orientation only: they come from other
training data (BookCorpus/UMBC, SNLI+MultiNLI), other tokenisation and partly other probes, so
they are not a like-for-like comparison. Only figures we could state with confidence are listed;
a missing cell means "not given here", not "not reported".

Units follow the tables of this package: accuracy and F1 in %, correlations as r in [-1, 1].
"""

from __future__ import annotations

REFERENCE: dict[str, dict[str, dict[str, float]]] = {
    # Logeswaran & Lee 2018, "An efficient framework for learning sentence representations"
    # (ICLR), Table 2: MC-QT, the multi-channel model trained on BookCorpus + UMBC.
    "QT paper (MC-QT)": {
        "MR": {"acc": 82.4},
        "CR": {"acc": 86.0},
        "SUBJ": {"acc": 94.8},
        "MPQA": {"acc": 90.2},
        "SST2": {"acc": 87.6},
        "TREC": {"acc": 92.4},
        "SICK-R": {"pearson": 0.874},
    },
    # Conneau et al. 2017, InferSent trained on AllNLI (SNLI + MultiNLI), test results with
    # SentEval as listed in the facebookresearch/InferSent README (infersent.allnli.pickle).
    "InferSent (AllNLI)": {
        "MR": {"acc": 81.1},
        "CR": {"acc": 86.3},
        "SUBJ": {"acc": 92.4},
        "MPQA": {"acc": 90.2},
        "SST2": {"acc": 84.6},
        "TREC": {"acc": 88.2},
        "MSRP": {"acc": 76.2, "f1": 83.1},
        "SICK-E": {"acc": 86.1},
        "SICK-R": {"pearson": 0.884},
        "STS14": {"pearson": 0.68, "spearman": 0.65},
    },
}
