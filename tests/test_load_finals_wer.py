"""bench/daemon/load.py's ``finals_wer``: each client's finals matched to the transcripts of
the utterances it sent (client n starts at utterance n), a lost utterance counted as all its
words deleted, and utterances not sent completely left out."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.daemon.load import ClientStats, finals_wer  # noqa: E402

REFS = ["go forward ten meters", "two nine three four zero", "rear left"]


def test_finals_wer_matches_each_clients_utterances():
    exact = ClientStats(utterances=3, texts=[(0, "GO FORWARD TEN METERS"),
                                             (1, "TWO NINE THREE"), (1, "FOUR ZERO"),
                                             (2, "REAR LEFT")])
    # client 1 starts at utterance 1: its 0th is "two nine three four zero"; its 1st is lost;
    # its 2nd was not sent completely (utterances=2): its final does not count
    second = ClientStats(utterances=2, texts=[(0, "TWO NINE THREE FOUR ZERO"),
                                              (2, "SOMETHING ELSE")])
    assert finals_wer([exact], REFS) == 0.0
    # 11 + 5 + 2 reference words, 2 deleted (client 1's utterance 1: "rear left")
    assert finals_wer([exact, second], REFS) == round(2 / 18, 4)
    assert finals_wer([ClientStats()], REFS) is None
