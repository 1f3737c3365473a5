"""load_gguf / load_hf from Python: a tiny Llama written here with PyPI gguf (and a Hugging Face folder written by
tests/oracle/hf_tiny_model.py with safetensors and tokenizers), generated greedily by the library and by an
independent float64 numpy forward (tests/oracle/llama_numpy.py, hf_tiny_model.py); the token sequences must be
equal. Then streaming, stop tokens, seeded sampling and errors. Runs on the first Vulkan device (lavapipe in CI).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import meganeura as mn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORACLE = os.path.join(ROOT, "tests", "oracle")
sys.path.insert(0, ORACLE)

from gguf_llama_oracle import permute, spm_tokenizer  # noqa: E402
from llama_numpy import forward  # noqa: E402

import gguf  # noqa: E402  (a missing gguf fails the test, never skips it)
from gguf import GGMLQuantizationType as T  # noqa: E402

CFG = dict(vocab=40, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=96, rope_theta=10000.0,
           rms_eps=1e-5, tied=True)
CONTEXT = 32
# Stored types: Q8_0 and F16 blocks stay in their type on the device; the oracle reads the same dequantized values.
TYPES = {"token_embd": T.Q8_0, "attn_q": T.F16, "attn_k": T.Q8_0, "attn_v": T.F32, "attn_output": T.F16,
         "ffn_gate": T.F32, "ffn_up": T.Q8_0, "ffn_down": T.F16}


def write_tiny_llama(path, seed):
    """A `llama` GGUF as llama.cpp's converter writes one (Q/K rows permuted per head); returns the weights as the
    file holds them, dequantized, in the Hugging Face row order the numpy forward expects."""
    c, rng = CFG, np.random.default_rng(seed)
    d = c["hidden"] // c["heads"]
    shapes = {"token_embd.weight": (c["vocab"], c["hidden"]), "output_norm.weight": (c["hidden"],)}
    for n in range(c["layers"]):
        b = "blk.%d." % n
        shapes.update({b + "attn_norm.weight": (c["hidden"],), b + "ffn_norm.weight": (c["hidden"],),
                       b + "attn_q.weight": (c["heads"] * d, c["hidden"]),
                       b + "attn_k.weight": (c["kv_heads"] * d, c["hidden"]),
                       b + "attn_v.weight": (c["kv_heads"] * d, c["hidden"]),
                       b + "attn_output.weight": (c["hidden"], c["heads"] * d),
                       b + "ffn_gate.weight": (c["intermediate"], c["hidden"]),
                       b + "ffn_up.weight": (c["intermediate"], c["hidden"]),
                       b + "ffn_down.weight": (c["hidden"], c["intermediate"])})
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(c["hidden"])
    w.add_block_count(c["layers"])
    w.add_feed_forward_length(c["intermediate"])
    w.add_head_count(c["heads"])
    w.add_head_count_kv(c["kv_heads"])
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_eps"])
    w.add_rope_dimension_count(d)
    spm_tokenizer(w, c["vocab"])  # <unk> <s> </s> <|im_end|> ▁a ▁b ... (bos 1, eos 2)
    held = {}
    for name, shape in shapes.items():
        leaf = name.split(".")[-2]
        norm = "norm" in name
        # a wide spread of logits, so that greedy choices are far from ties (checked below)
        v = (rng.uniform(0.9, 1.1, shape) if norm else rng.normal(0.0, 0.15, shape)).astype(np.float32)
        t = T.F32 if norm else TYPES[leaf]
        held[name] = (gguf.quants.dequantize(gguf.quants.quantize(v, t), t) if t != T.F32 else v).astype(np.float64)
        stored = permute(v, c["heads"] if leaf == "attn_q" else c["kv_heads"]) if leaf in ("attn_q", "attn_k") else v
        if t == T.F32:
            w.add_tensor(name, stored)
        elif t == T.F16:
            w.add_tensor(name, stored.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(stored, t), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {k: v.reshape(-1) for k, v in held.items()}


def numpy_greedy(logits_of, prompt, max_tokens, stops=()):
    """Greedy decoding with a full float64 forward per token. Asserts every choice wins by a margin that float32
    on the GPU cannot overturn, so that an equal sequence is a fair demand."""
    seq, out = list(prompt), []
    for _ in range(max_tokens):
        last = logits_of(seq)[-1]
        top2 = np.sort(last)[-2:]
        assert top2[1] - top2[0] > 1e-3 * (1 + abs(top2[1])), "oracle too close to a tie: pick another seed"
        t = int(np.argmax(last))
        if t in stops:
            break
        out.append(t)
        seq.append(t)
    return out


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("gguf") / "tiny_llama.gguf")
    weights = write_tiny_llama(path, seed=5)
    return path, weights


@pytest.fixture(scope="module")
def model(tiny_gguf):
    return mn.load_gguf(tiny_gguf[0])


def test_load_gguf_reads_config_tokenizer_and_weights(model, tiny_gguf):
    assert model.architecture == "llama"
    c = model.config
    assert (c["vocab"], c["hidden"], c["layers"], c["heads"], c["kv_heads"], c["intermediate"]) == (40, 64, 2, 4, 2, 96)
    assert c["max_context"] == CONTEXT and c["tied_embeddings"]
    assert model.bos_id == 1 and model.add_bos and model.eos_ids == [2, 3]
    tok = model.tokenizer
    assert tok.vocab_size == 40
    assert tok.encode("a b") == [1, 4, 5]  # <s> ▁a ▁b (SentencePiece-style, BOS from the post-processor)
    assert tok.decode([4, 5]) == "a b"
    assert model.encode("a b") == [1, 4, 5]
    dtypes = {w["name"]: w["dtype"] for w in model.weights}
    assert dtypes["token_embd.weight"] == "q8_0" and dtypes["blk.0.attn_v.weight"] == "f32"
    # a weight's bytes are a read-only view into the file's mapping (no copy): an f32 tensor is its values
    v = model.weight_bytes("blk.1.attn_v.weight")
    assert v.dtype == np.uint8 and not v.flags.writeable
    np.testing.assert_array_equal(v.view(np.float32), tiny_gguf[1]["blk.1.attn_v.weight"].astype(np.float32))
    with pytest.raises(ValueError, match="nope"):
        model.weight_bytes("nope")


def test_greedy_generation_equals_numpy(model, tiny_gguf):
    weights = tiny_gguf[1]
    result = model.generate("a b c", max_tokens=12, temperature=0, stop=[])
    assert result.prompt == [1, 4, 5, 6]
    want = numpy_greedy(lambda s: forward(CFG, weights, s), result.prompt, 12)
    assert result.tokens == want
    assert result.finish == "length" and result.decode_steps == 11
    assert result.text == model.tokenizer.decode(want)
    # a token prompt is the same prompt
    assert model.generate([1, 4, 5, 6], max_tokens=12, temperature=0, stop=[]).tokens == want
    # with the model's stop tokens, generation ends where numpy's first end-of-sequence choice is
    stopped = model.generate("a b c", max_tokens=12, temperature=0)
    assert stopped.tokens == numpy_greedy(lambda s: forward(CFG, weights, s), result.prompt, 12, stops=(2, 3))


def test_streaming_callback_sees_every_token_and_can_stop(model):
    seen = []
    full = model.generate("a", max_tokens=6, temperature=0, stop=[],
                          on_token=lambda t, piece: seen.append((t, piece)))
    assert [t for t, _ in seen] == full.tokens
    assert "".join(p for _, p in seen) == full.text
    short = model.generate("a", max_tokens=6, temperature=0, stop=[], on_token=lambda t, piece: len(seen) < 0)
    assert short.finish == "callback" and short.tokens == full.tokens[:1]

    def boom(t, piece):
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        model.generate("a", max_tokens=6, on_token=boom)
    # the generator is usable after a callback failed
    assert model.generate("a", max_tokens=6, temperature=0, stop=[]).tokens == full.tokens


def test_stop_strings_and_seeded_sampling(model):
    first = model.generate("a", max_tokens=8, temperature=0, stop=[]).tokens
    piece = model.tokenizer.id_to_token(first[2])  # a token's text stops at that token's first draw
    cut = model.generate("a", max_tokens=8, temperature=0, stop=[piece])
    assert cut.finish == "stop" and cut.stop_token == first[2] and cut.tokens == first[:first.index(first[2])]
    with pytest.raises(ValueError, match="one token"):
        model.generate("a", stop=["a b c"])
    g = model.generator(max_context=16, prefill_buckets=[4, 16])
    assert g.max_context == 16 and g.prefill_buckets == [4, 16]
    kw = dict(max_tokens=10, temperature=0.9, top_k=20, top_p=0.95, seed=7, stop=[])
    a, b = g.generate("a b", **kw), g.generate("a b", **kw)
    assert a.tokens == b.tokens and len(a.tokens) == 10
    assert all(0 <= t < 40 for t in a.tokens)
    with pytest.raises(ValueError):
        g.generate([1, 99])  # outside the vocabulary
    with pytest.raises(ValueError):
        g.generate("a " * 20)  # longer than max_context


def test_generate_batch_rows_equal_single_greedy(model):
    g = model.generator(batch=2)
    rows = g.generate_batch(["a b", [1, 7, 8, 9]], max_tokens=5, temperature=0, stop=[])
    assert [r.tokens for r in rows] == [model.generate(p, max_tokens=5, temperature=0, stop=[]).tokens
                                        for p in ("a b", [1, 7, 8, 9])]


def test_load_hf_greedy_equals_numpy(tmp_path):
    out = str(tmp_path / "hf")
    subprocess.run([sys.executable, os.path.join(ORACLE, "hf_tiny_model.py"), out, "f32"], check=True)
    import hf_tiny_model
    from safetensors.numpy import load_file

    expected = json.load(open(os.path.join(out, "expected.json")))
    cfg = json.load(open(os.path.join(out, "config.json")))
    W = {k: v.astype(np.float64) for k, v in load_file(os.path.join(out, "model.safetensors")).items()}
    m = mn.load_hf(out)
    assert m.architecture == "llama" and m.config["hidden"] == 48
    ids = m.tokenizer.encode(expected["prompt"], add_special=False)
    assert ids == expected["ids"]  # PyPI tokenizers' encoding
    result = m.generate(ids, max_tokens=8, temperature=0, stop=[])
    room = cfg["max_position_embeddings"] - len(ids)  # the KV cache ends there
    assert result.finish == ("length" if room > 8 else "context")
    assert result.tokens == numpy_greedy(lambda s: hf_tiny_model.forward(cfg, W, s), ids, min(8, room))
    with pytest.raises(ValueError, match="config.json"):
        mn.load_hf(str(tmp_path))  # a folder without a model


def test_load_gguf_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 12)
    with pytest.raises(ValueError, match="bad.gguf"):
        mn.load_gguf(str(bad))
