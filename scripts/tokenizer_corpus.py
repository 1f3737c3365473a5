#!/usr/bin/env python3
"""The tokenizer test corpus: `corpus()` returns the same list of strings on every run (a seeded generator, no
files). It mixes English, code, several scripts, emoji sequences, combining marks, whitespace runs, digit runs,
special tokens written inside text and rarely seen but valid code points.

    python3 scripts/tokenizer_corpus.py [N]      prints the corpus as JSON
"""
import json
import random
import sys

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<file_sep>", "<filename>",
           "<gh_stars>", "<jupyter_code>", "<empty_output>"]

ENGLISH = """the quick brown fox jumps over the lazy dog while a model reads every token of its prompt
and writes the answer one piece at a time because nobody told it how long the answer should be
tokenizers split text into words and words into pieces that a vocabulary knows so that rare words
still have a spelling made of common parts""".split()

CONTRACTIONS = ["don't", "I'm", "we'll", "they've", "she'd", "it's", "you're", "CAN'T", "I'LL", "WE'VE",
                "He'S", "O'Neil", "rock'n'roll", "'tis", "ma'am", "'s", "'ſ", "x'ſy", "''s", "' s"]

SCRIPTS = {
    "cjk": "我们在这里测试分词器的行为。東京は日本の首都です。ひらがなとカタカナも使います。한국어 문장도 포함됩니다。",
    "arabic": "مرحبا بالعالم، هذه جملة عربية للاختبار مع أرقام ١٢٣ و٤٥٦.",
    "devanagari": "यह एक परीक्षण वाक्य है। हिन्दी में संयुक्ताक्षर क्ष त्र ज्ञ होते हैं।",
    "cyrillic": "Съешь же ещё этих мягких французских булок, да выпей чаю. Ёлка и йогурт.",
    "greek": "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Ὦ ξεῖν᾽, ἀγγέλλειν.",
    "hebrew": "שלום עולם, זהו משפט בעברית עם ניקוד: שָׁלוֹם.",
    "thai": "ภาษาไทยไม่มีช่องว่างระหว่างคำ ทดสอบการตัดคำ",
    "latin": "Ça va? Größe, Ærøskøbing, Łódź, Dvořák, İstanbul, naïve café, ﬁﬂ ligatures, Ǆ ǅ ǆ.",
}

EMOJI = ["😀", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "1️⃣", "❤️", "🧑🏿‍🚀", "🫠", "✈︎", "👋🏻👋🏼👋🏽👋🏾👋🏿",
         "🤷‍♀️", "🐈‍⬛", "☺", "©", "™"]

COMBINING = ["e\u0301", "a\u0300\u0323", "n\u0303", "Z\u0351\u0352\u0353\u0354a\u0489l\u0334g\u0337o",
             "\u0301leading mark", "q\u0307\u0323", "ก\u0e31\u0e49", "अ\u093c\u0901"]

SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", "\u00a0", "\u00a0\u00a0",
          "\u2003", "\u3000", "\u2009", "\u202f", "\u0085", "\u2028", "\u2029", " \t \n ", "\n \n", "\x0b", "\x0c",
          "\u200b", "\u1680"]

DIGITS = ["0", "7", "42", "123", "2024", "31415926535", "1,000,000", "3.14159", "1e-9", "0x1F", "٠١٢٣٤٥٦٧٨٩",
          "１２３", "²³", "½", "Ⅻ", "ⅷ", "१२३", "๑๒๓", "①②", "٣.١٤"]

CODE = [
    "def f(x):\n    return x * 2  # double\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "if __name__ == \"__main__\":\n    main()\n",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "$ ls -la | grep '\\.cpp$' && echo \"done\" > /dev/null 2>&1",
    "#include <vector>\nstd::vector<int> v{1, 2, 3};\n",
    "const add = (a, b) => a + b; // arrow\n",
    "<div class=\"x\">&nbsp;&lt;tag&gt;</div>",
    "    indented    with    spaces\n\t\tand tabs\n",
    "x+=1;y-=2;z*=3;w/=4;a%=5;b**=2;c//=3",
    "fn main() { println!(\"{}\", 1_000_u64); }",
    "s = 'it''s'; t = \"don't\"; u = `isn't`",
]

RARE = ["\ufffd", "\ufeffBOM", "\ue000\uf8ff", "\U0010ffff", "\U000e0001", "\u0378unassigned", "\x00nul",
        "\x1b[31mred\x1b[0m", "\x7fdel", "\u202eRTL override\u202c", "\u200e\u200f", "\ufe0f", "\U0001d400\U0001d7d8",
        "\u00ad", "\u2060", "\\xc3\\x28", "%C3%A9", "\ud7ff", "\ue0100", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\U0001f9ea"]


def fragment(rng: random.Random) -> str:
    kind = rng.randrange(12)
    if kind == 0:
        return " ".join(rng.choice(ENGLISH) for _ in range(rng.randint(1, 12)))
    if kind == 1:
        return rng.choice(CONTRACTIONS)
    if kind == 2:
        s = rng.choice(list(SCRIPTS.values()))
        a = rng.randrange(len(s))
        return s[a:a + rng.randint(1, 30)]
    if kind == 3:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))
    if kind == 4:
        return rng.choice(COMBINING)
    if kind == 5:
        return rng.choice(SPACES)
    if kind == 6:
        return rng.choice(DIGITS)
    if kind == 7:
        return rng.choice(CODE)
    if kind == 8:
        t = rng.choice(SPECIAL)
        # whole tokens, and now and then a truncated one that must not match
        return t if rng.random() < 0.8 else t[:rng.randint(1, len(t) - 1)]
    if kind == 9:
        return rng.choice(RARE)
    if kind == 10:
        return "".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2ff), rng.randint(0x370, 0x52f),
                                       rng.randint(0x4e00, 0x4fff), rng.randint(0x1f300, 0x1f5ff),
                                       rng.randint(0x600, 0x6ff), rng.randint(0x900, 0x97f)]))
                       for _ in range(rng.randint(1, 8)))
    return rng.choice(["(", ")", "...", "!?", "—", "–", "\"", "'", "``", "«»", "“quoted”", "@user", "#tag",
                       "e.g.", "U.S.A.", "http://example.com/a?b=c&d=e", "a_b_c", "__init__"])


def corpus(n: int = 2400, seed: int = 20261204) -> list:
    rng = random.Random(seed)
    out = ["", " ", "a", "Hello world", "Hello  world", "hello\n\nworld", "  leading", "trailing  ",
           "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n", "<|im_start|><|im_end|>",
           "<|im_start|>x<|im_end|", "123456789", "a1b22c333d4444", " 1 22 333", "don't DON'T Don'T 'ſ",
           "\r\n\r\n", "\t\ttabs\t", "\u00a0nbsp\u00a0", "👨‍👩‍👧‍👦 family", "e\u0301te\u0301"]
    for script in SCRIPTS.values():
        out.append(script)
    seen = set(out)
    while len(out) < n:
        parts = [fragment(rng) for _ in range(rng.randint(1, 6))]
        joiner = rng.choice(["", " ", "", "\n", rng.choice(SPACES)])
        s = joiner.join(parts)
        if s not in seen:  # distinct strings
            seen.add(s)
            out.append(s)
    return out


if __name__ == "__main__":
    json.dump(corpus(int(sys.argv[1]) if len(sys.argv) > 1 else 2400), sys.stdout, ensure_ascii=False, indent=0)
