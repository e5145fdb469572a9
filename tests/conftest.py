"""Fixtures shared by the test modules."""
import pytest


@pytest.fixture(scope="module")
def one_thread():
    "Tiny matrices: one torch thread is as fast, and many times faster when other jobs share the cores."
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
