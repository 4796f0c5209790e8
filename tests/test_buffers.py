"""Growing per-stream buffers take one of a few sizes (powers of two, then multiples of
``LARGE``), so the C heap reuses what one stream frees for the next."""

import pytest

from streamdec.buffers import LARGE, size_class


@pytest.mark.parametrize("need, minimum, size", [
    (0, 4096, 4096), (1, 4096, 4096), (4096, 4096, 4096), (4097, 4096, 8192),
    (130, 128, 256), (127, 128, 128), (LARGE, 64, LARGE), (LARGE + 1, 64, 2 * LARGE),
    (5 * LARGE - 3, 64, 5 * LARGE), (5 * LARGE + 3, 64, 6 * LARGE)])
def test_size_classes(need, minimum, size):
    assert size_class(need, minimum) == size
