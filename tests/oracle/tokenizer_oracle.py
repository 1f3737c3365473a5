#!/usr/bin/env python3
"""Oracle for tests/oracle/test_tokenizer.cpp, run with the `python3` on PATH (PyPI `tokenizers`, pinned in
scripts/requirements-oracle.txt, and `jinja2`). Writes into OUT_DIR:

  corpus.json                   the corpus (scripts/tokenizer_corpus.py)
  CASE.tokenizer.json           a tokenizer.json for meganeura::Tokenizer::from_json
  CASE.data.json                the same tokenizer as TokenizerData arrays (where the case has them)
  CASE.expected.json            what `tokenizers` gives: ids (with and without the post-processor's tokens),
                                decoded text (with and without special tokens), and random id lists decoded
  chatml.json                   SmolLM2-Instruct's chat template rendered by jinja2

Cases (trained here by `tokenizers` on the corpus, nothing downloaded):
  smollm2   SmolLM2's pipeline: Digits(individual) + ByteLevel(GPT-2 regex), its 17 special tokens
  llama3    Split(Llama-3 regex) + ByteLevel(no regex), ignore_merges, a BOS template
  gpt2      ByteLevel(add_prefix_space) and added tokens with lstrip / rstrip / single_word / normalized
  spm       a SentencePiece-style `llama` vocabulary (scores, <0xXX> byte tokens, <unk> <s> </s>) and its
            Hugging Face conversion (scripts/gguf_tokenizer.py), which is the oracle
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

from tokenizer_corpus import corpus  # noqa: E402
from gguf_tokenizer import LLAMA3_REGEX, tokenizer_json  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402,E501

SMOLLM2_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>", "<file_sep>",
                   "<filename>", "<gh_stars>", "<issue_start>", "<issue_comment>", "<issue_closed>",
                   "<jupyter_start>", "<jupyter_text>", "<jupyter_code>", "<jupyter_output>", "<jupyter_script>",
                   "<empty_output>"]

# SmolLM2-135M-Instruct's tokenizer.chat_template (from its GGUF metadata).
SMOLLM2_TEMPLATE = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
                    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
                    "{% endif %}")


def train(texts, pre, specials, vocab_size, **bpe):
    tok = Tokenizer(models.BPE(**bpe))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def expected(tok, texts, rng):
    n = tok.get_vocab_size(with_added_tokens=True)
    with_special = [e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]
    without = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    random_ids = [[rng.randrange(n + 3) for _ in range(rng.randint(1, 12))] for _ in range(300)]
    return {
        "ids": with_special,
        "ids_no_special": without,
        "decoded": tok.decode_batch(with_special, skip_special_tokens=False),
        "decoded_skip_special": tok.decode_batch(with_special, skip_special_tokens=True),
        "random_ids": random_ids,
        "random_decoded": tok.decode_batch(random_ids, skip_special_tokens=False),
    }


def gpt2_data(tok, pre, add_bos=False, bos=-1):
    """TokenizerData arrays of a trained byte-level BPE, as a GGUF `gpt2` vocabulary carries them."""
    d = json.loads(tok.to_str())
    vocab = d["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    special = {a["content"] for a in d["added_tokens"] if a["special"]}
    return {"model": "gpt2", "tokens": tokens, "scores": [], "token_types": [3 if t in special else 1 for t in tokens],
            "merges": [" ".join(m) for m in d["model"]["merges"]], "pre": pre, "bos_id": bos, "eos_id": -1,
            "unk_id": -1, "pad_id": -1, "add_bos": add_bos, "add_eos": False, "add_space_prefix": False}


def spm_data(texts):
    """A SentencePiece-style vocabulary: pieces learned by BPE over U+2581-marked words, scored by learning
    order (all distinct), plus <unk> <s> </s>, a control and a user-defined token, and 256 byte tokens."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="never", split=True)
    # trained on part of the corpus so that the rest has characters only the byte fallback covers
    tok.train_from_iterator(texts[: len(texts) // 2],
                            trainer=trainers.BpeTrainer(vocab_size=1500, show_progress=False, limit_alphabet=300))
    learned = sorted(tok.get_vocab().items(), key=lambda e: e[1])
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|user|>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3, 3, 4] + [6] * 256
    scores = [0.0] * len(tokens)
    for piece, i in learned:
        if piece in tokens:
            continue
        tokens.append(piece)
        types.append(1)
        scores.append(-float(i) - 1.0)
    return {"model": "llama", "tokens": tokens, "scores": scores, "token_types": types, "merges": [], "pre": "",
            "bos_id": 1, "eos_id": 2, "unk_id": 0, "pad_id": -1, "add_bos": True, "add_eos": False,
            "add_space_prefix": True}


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    texts = corpus()
    rng = random.Random(7)

    def write(name, obj):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False))

    write("corpus.json", texts)

    smol = train(texts, pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
                 SMOLLM2_SPECIAL, 2000)
    write("smollm2.tokenizer.json", smol.to_str())
    write("smollm2.data.json", gpt2_data(smol, "smollm"))
    write("smollm2.expected.json", expected(smol, texts, rng))

    llama3 = train(texts, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"], 2500, ignore_merges=True)
    bos = llama3.token_to_id("<|begin_of_text|>")
    llama3.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])])
    write("llama3.tokenizer.json", llama3.to_str())
    write("llama3.data.json", gpt2_data(llama3, "llama-bpe", add_bos=True, bos=bos))
    write("llama3.expected.json", expected(llama3, texts, rng))

    gpt2 = train(texts, pre_tokenizers.ByteLevel(add_prefix_space=True), ["<|endoftext|>"], 1200)
    gpt2.add_tokens([AddedToken("<|im_start|>", special=True, normalized=False, lstrip=True),
                     AddedToken("<|im_end|>", special=True, normalized=False, rstrip=True),
                     AddedToken("jumps", single_word=True, normalized=False),
                     AddedToken(" the", normalized=True),
                     AddedToken("fox", normalized=True, single_word=True, lstrip=True, rstrip=True),
                     AddedToken("<filename>", special=False, normalized=False)])
    write("gpt2.tokenizer.json", gpt2.to_str())
    write("gpt2.expected.json", expected(gpt2, texts, rng))

    data = spm_data(texts)
    spm = Tokenizer.from_str(tokenizer_json(data))
    write("spm.data.json", data)
    write("spm.tokenizer.json", spm.to_str())
    write("spm.expected.json", expected(spm, texts, rng))

    import jinja2
    template = jinja2.Environment().from_string(SMOLLM2_TEMPLATE)
    chats = [
        [{"role": "user", "content": "Hello!"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
         {"role": "assistant", "content": "4"}, {"role": "user", "content": "Thanks\n\tbye"}],
        [{"role": "assistant", "content": "I start."}],
        [],
    ]
    write("chatml.json", [{"messages": c, "add_generation_prompt": g,
                           "text": template.render(messages=c, add_generation_prompt=g)}
                          for c in chats for g in (False, True)])


if __name__ == "__main__":
    main()
