import numpy as np
import pytest

from streamdec.search import SearchConfig, make_search
from streamdec.search.base import Hypothesis, initial_context
from toy_model import ToyModel, script_from_winners


def run(model, config, frames_per_step=8):
    search = make_search(model, config, unk_id=5)
    state = search.init_state()
    full = model.script[None]
    for t in range(0, full.shape[1], frames_per_step):
        state = search.step([state], full[:, t:t + frames_per_step])[0]
    return search, state


def test_one_token_per_winning_frame_with_absolute_frames():
    model = ToyModel(script_from_winners([0, 2, 0, 3, 3, 0, 0, 4]))
    _, st = run(model, SearchConfig())
    assert st.hyp.tokens == (2, 3, 3, 4)
    assert st.hyp.frames == (1, 3, 4, 7)
    assert st.encoder_frame_offset == 8
    assert st.hyp.context == (3, 4)


def test_initial_context_is_minus_one_then_blank():
    assert initial_context(2) == (-1, 0)
    assert initial_context(3, blank_id=0) == (-1, -1, 0)


def test_max_sym_per_frame_lets_a_frame_emit_more():
    script = script_from_winners([2, 0, 0, 0, 0, 0, 0, 0])
    script[0, 3] = 2.0  # runner-up on frame 0
    model = ToyModel(script, repeat_penalty=5.0)  # after emitting 2, token 2 loses
    _, one = run(model, SearchConfig(max_sym_per_frame=1))
    _, two = run(model, SearchConfig(max_sym_per_frame=2))
    assert one.hyp.tokens == (2,)
    assert two.hyp.tokens == (2, 3) and two.hyp.frames == (0, 0)


def test_unk_is_a_blank_unless_disabled():
    model = ToyModel(script_from_winners([5, 2, 5, 0, 0, 0, 0, 0]))
    _, st = run(model, SearchConfig())
    assert st.hyp.tokens == (2,)
    _, st = run(model, SearchConfig(unk_as_blank=False))
    assert st.hyp.tokens == (5, 2, 5)


def test_blank_penalty_turns_close_blanks_into_tokens():
    script = np.zeros((8, 6), np.float32)
    script[:, 0] = 1.0
    script[3, 4] = 0.5  # blank wins frame 3 by 0.5
    model = ToyModel(script)
    assert run(model, SearchConfig())[1].hyp.tokens == ()
    assert run(model, SearchConfig(blank_penalty=1.0))[1].hyp.tokens == (4,)


def test_score_is_the_path_log_prob_and_temperature_only_changes_confidences():
    model = ToyModel(script_from_winners([0, 2, 0, 3, 0, 0, 0, 0]))
    _, a = run(model, SearchConfig())
    _, b = run(model, SearchConfig(temperature=2.0))
    assert a.hyp.tokens == b.hyp.tokens
    assert a.hyp.score == pytest.approx(b.hyp.score)
    p = np.exp(3.0) / (np.exp(3.0) + 5)
    assert a.hyp.score == pytest.approx(8 * np.log(p), abs=1e-5)
    assert a.hyp.log_probs[0] == pytest.approx(np.log(p), abs=1e-5)
    assert b.hyp.log_probs[0] < a.hyp.log_probs[0]  # flatter at temperature 2: less sure


def test_chunk_boundaries_do_not_matter():
    rng = np.random.RandomState(0)
    model = ToyModel(rng.randn(40, 6) * 3, repeat_penalty=1.0)
    ref = run(model, SearchConfig(max_sym_per_frame=2), frames_per_step=40)[1].hyp
    for step in (1, 3, 8):
        assert run(model, SearchConfig(max_sym_per_frame=2), frames_per_step=step)[1].hyp == ref


def test_reset_keeps_context_and_starts_segment_at_offset():
    model = ToyModel(script_from_winners([0, 2, 0, 3, 0, 0, 0, 0]))
    search, st = run(model, SearchConfig())
    r = search.reset(st)
    assert r.hyp == Hypothesis(context=(2, 3))
    assert r.segment_start == r.encoder_frame_offset == 8


def test_decoder_cache_is_bounded_and_keyed_by_context():
    rng = np.random.RandomState(1)
    model = ToyModel(rng.randn(200, 6) * 3)
    search, st = run(model, SearchConfig(decoder_cache_size=10))
    assert len(search.decoder_cache) <= 10
    # at most 5 * 5 + 1 distinct contexts exist: far fewer decoder calls than tokens
    assert len(st.hyp.tokens) > 50
