"""``python -m nnkern bench --op qnet``: nnkern's layer-by-layer forward pass of torch's quantized ResNet-18 and
MobileNet-v2 computes what torch's quantized model computes (small inputs, so it runs in seconds), the
argument parsing, and the CLI's tables (one repetition, in a subprocess)."""
import subprocess

import numpy as np
import pytest

from helpers import describe_process, python_command, torch_int8_conv_is_exact

torch = pytest.importorskip("torch", reason="the quantized networks are defined and quantized in torch")
from nnkern.bench import qnet  # noqa: E402

SIZE = 64  # ResNet-18 down to 2x2, MobileNet-v2 to 2x2 before the global pool


@pytest.fixture(scope="module", params=qnet.NETWORKS)
def net(request):
    return qnet.make_net(request.param, SIZE)


def _torch_int(m, x):
    """torch's quantized module ``m`` on quantized x, as NHWC integers."""
    with torch.inference_mode():
        return m(x).int_repr().permute(0, 2, 3, 1).numpy().astype(np.int64)


def test_first_layers_equal_torch(net):
    """The quantized input and the first convolution (ReLU fused) are torch's, within one uint8 step (torch's
    x86 engine requantizes in its own float order), where torch's int8 convolution is exact."""
    if not torch_int8_conv_is_exact():
        pytest.skip("torch's int8 convolution saturates on this CPU (vpmaddubsw without VNNI): not a reference")
    x = qnet.images(2, SIZE, 5)
    prog = qnet.nnkern_program(net.name, net.qmodel)
    prog(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    q = net.qmodel
    with torch.inference_mode():
        xq = q.quant(torch.from_numpy(x))
    assert np.array_equal(prog.bufs[0], xq.int_repr().permute(0, 2, 3, 1).numpy())
    stem = _torch_int(q.stem, xq)
    assert prog.bufs[1].shape == stem.shape
    assert np.abs(prog.bufs[1].astype(np.int64) - stem).max() <= 1


def test_logits_close_to_torch_and_float(net):
    """Whole network: nnkern's logits within a few % of torch's quantized model's and of the float model's
    (nnkern requantizes a residual block once where torch does twice: the networks differ in rounding only)."""
    x = qnet.images(2, SIZE, 7)
    nn = qnet.nnkern_call(net, x)
    tq, fl = qnet.torch_call(net, x, 1), qnet.float_call(net, x)
    diffs = qnet.check(nn, {"torch": tq, "float": fl})
    assert nn.out.shape == (2, 1000) and nn.out.dtype == np.float32
    assert diffs["torch"] < 0.06 and diffs["float"] < 0.06, diffs
    before = nn.out.copy()
    nn()  # the buffers are reused: a second run gives the same logits
    assert np.array_equal(before, nn.out)


def test_program_runs_steps_on_earlier_outputs():
    prog = qnet.Program()
    a = prog.add(lambda x, out: x + 1, 0)
    b = prog.add(lambda x, out: x * 2, a)
    prog.add(lambda x, y, out: x - y, b, 0)
    assert prog(np.array([3])) == np.array([5])  # (3 + 1) * 2 - 3


def test_select():
    assert qnet.select(None) == (list(qnet.NETWORKS), list(qnet.BATCHES))
    assert qnet.select(["resnet18", "8"]) == (["resnet18"], [8])
    with pytest.raises(ValueError, match="network names"):
        qnet.select(["resnet50"])
    with pytest.raises(ValueError, match="unknown network"):
        qnet.float_model("vgg")


def test_agreement_counts_every_pair(net):
    a = qnet.agreement(net, libraries=["torch"], samples=8)
    assert set(a["raw"]) == {("nnkern", "float"), ("nnkern", "torch"), ("float", "torch")}
    assert all(0 <= v <= 8 for v in [*a["raw"].values(), *a["centred"].values()])
    assert a["raw"][("nnkern", "float")] >= 6  # random weights: nearly one class for every image
    table = qnet.agreement_table({net.name: a})
    assert f"| {net.name} | nnkern / torch |" in table


def test_cli_tables():
    pytest.importorskip("onnxruntime")
    proc = subprocess.run(python_command("-m", "nnkern", "bench", "--op", "qnet", "--shapes", "mobilenet_v2", "1",
                                         "--threads", "1", "--repeats", "1"),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, describe_process(proc)
    out = proc.stdout
    assert "qnet: quantized mobilenet_v2 (224x224x3, batch 1), 1 thread(s)" in out
    assert "| torch |" in out and "| onnxruntime |" in out and "Top-1 agreement" in out
