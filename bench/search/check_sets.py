#!/usr/bin/env python3
"""Counts and checks for bench/search/eval.json and bench/poison/corpus.json (run from the repository root).

search-eval: counts per category, per wanted listing, language of listings; verifies
every no_shared_word claim mechanically (lowercase, split on non-alphanumerics, drop a
small stop-word list, compare crude stems: a trailing s/es/ing/ed/e stripped, plus a
shared-prefix rule for derived forms such as deploy/deployment); Chinese text is
compared on character bigrams; checks 'long' (> 16 words) and 'chinese' claims.
poison-corpus: counts per technique, field, intent, language; checks that every payload
is a substring of its text, ids are unique and split groups are complete.
Exit status 1 when a check fails."""
import json
import re
import sys
import unicodedata
from collections import Counter

STOP = set(
    "a an the of to in on for and or is are was were be been am i me my we our us you your it its this that these those "
    "what which who whom how when where why do does did with at by from as can will there their they them he she his her "
    "not no if so than any some all has have had".split()
)
SUFFIXES = ("ing", "es", "ed", "s", "e")
DERIV = ("ment", "ments", "er", "ers", "ing", "ed", "s", "es", "ly", "ty", "ion", "ions", "al", "ity", "y", "ies", "able", "ful", "ness", "or", "ors", "ive")


def is_cjk(ch):
    return "\u3040" <= ch <= "\u30ff" or "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"


def tokens(text):
    """ASCII/latin words (lowercased, stop words dropped) and CJK character bigrams."""
    words, grams = set(), set()
    for run in re.split(r"[^0-9a-zA-Z\u00c0-\u024f\u3040-\u30ff\u3400-\u9fff]+", text.lower()):
        if not run:
            continue
        # split mixed runs into CJK and non-CJK parts
        for part in re.findall(r"[\u3040-\u30ff\u3400-\u9fff]+|[^\u3040-\u30ff\u3400-\u9fff]+", run):
            if is_cjk(part[0]):
                if len(part) == 1:
                    grams.add(part)
                grams.update(part[i : i + 2] for i in range(len(part) - 1))
            elif part not in STOP:
                words.add(part)
    return words, grams


def stems(w):
    out = {w}
    for s in SUFFIXES:
        if w.endswith(s) and len(w) - len(s) >= 3:
            out.add(w[: -len(s)])
    return out


def shared(qw, lw):
    """Pairs (query word, listing word) that share a crude stem."""
    hits = []
    for a in qw:
        for b in lw:
            sa, sb = stems(a), stems(b)
            if sa & sb:
                hits.append((a, b))
                continue
            short, long_ = (a, b) if len(a) <= len(b) else (b, a)
            if len(short) >= 3 and long_.startswith(short) and (len(short) >= 5 or long_[len(short):] in DERIV):
                hits.append((a, b))
                continue
            if any(len(x) >= 4 and y.startswith(x) and y[len(x):] in DERIV for x in stems(short) for y in (long_,)):
                hits.append((a, b))
    return hits


def listing_text(l):
    parts = [l["department"], l["name"], l["title"], l["description"], " ".join(l["tags"])]
    for a in l.get("args", []):
        parts += [a["name"], a["description"]]
    return " ".join(parts)


def has_cjk(s):
    return any(is_cjk(c) for c in s)


def search_stats(path):
    ok = True
    d = json.load(open(path, encoding="utf-8"))
    L = {f"{l['department']}/{l['name']}": l for l in d["listings"]}
    qs = d["queries"]
    n = len(qs)
    print(f"== {path}: {len(L)} listings, {n} queries")
    zh_listings = {s for s, l in L.items() if has_cjk(l["title"] + l["description"])}
    orig = json.load(open("/work/main/bench/search/queries.json"))["cases"]
    new = len(L) - len(orig)
    print(f"listings: {len(orig)} from queries.json, {new} new, {len(zh_listings)} written in Chinese ({100*len(zh_listings)/new:.0f} % of new)")
    print("departments:", dict(Counter(l["department"] for l in L.values())))
    for c in orig:  # originals unchanged
        l = c["listing"]
        m = L.get(f"{l['department']}/{l['name']}")
        if not m or any(m[k] != l[k] for k in ("title", "description", "tags")):
            print("CHANGED original listing", l["name"]); ok = False
    cats = Counter(c for q in qs for c in q["categories"])
    for c, k in cats.most_common():
        print(f"  {c:16} {k:4}  {100*k/n:5.1f} %")
    zq = [q for q in qs if "chinese" in q["categories"]]
    print(f"chinese queries wanting a Chinese-described listing: {sum(q['want'] in zh_listings for q in zq)}, an English one: {sum(q['want'] not in zh_listings for q in zq)}")
    per = Counter(q["want"] for q in qs)
    missing = [s for s in L if s not in per]
    print("queries per listing:", dict(sorted(Counter(per.values()).items())), "listings without a query:", missing)
    if missing: ok = False
    long_words = [len(q["query"].split()) for q in qs if "long" in q["categories"]]
    print(f"long queries: {len(long_words)}, over 40 words: {sum(w > 40 for w in long_words)}")
    dup = [q for q, k in Counter(q["query"] for q in qs).items() if k > 1]
    if dup: print("DUPLICATE queries", dup); ok = False
    for q in qs:
        cs, text = q["categories"], q["query"]
        if q["want"] not in L:
            print("UNKNOWN want", q); ok = False; continue
        if ("chinese" in cs) != (has_cjk(text) and not re.search("[\u3040-\u30ff]", text)):
            print("CHINESE claim wrong:", text); ok = False
        if ("long" in cs) != (len(text.split()) > 16) and not has_cjk(text):
            print(f"LONG claim wrong ({len(text.split())} words):", text); ok = False
        qw, qg = tokens(text)
        lw, lg = tokens(listing_text(L[q["want"]]))
        hits = shared(qw, lw)
        gh = qg & lg
        if "no_shared_word" in cs and (hits or gh):
            print(f"NO_SHARED_WORD fails: {text!r} -> {q['want']}: {hits} {sorted(gh)}"); ok = False
        if "no_shared_word" not in cs and not hits and not gh and "--hints" in sys.argv:
            print(f"  could be no_shared_word: {text!r} -> {q['want']}")
    return ok


def poison_stats(path):
    ok = True
    d = json.load(open(path, encoding="utf-8"))
    P, B = d["poisoned"], d["benign_hard"]
    print(f"== {path}: {len(P)} poisoned, {len(B)} benign_hard")
    ids = [x["id"] for x in P + B]
    if len(ids) != len(set(ids)): print("DUPLICATE ids"); ok = False
    for name, key in (("technique", "technique"), ("field", "field"), ("intent", "intent"), ("language", "language")):
        print(f"poisoned per {name}:")
        for k, v in Counter(x.get(key, "?") for x in P).most_common():
            print(f"  {k:32} {v:4}")
    non_en = sum(x["language"] != "en" for x in P)
    print(f"non-English poisoned: {non_en} ({100*non_en/len(P):.0f} %)")
    for x in P:
        if x["payload"] not in x["text"]:
            print("PAYLOAD not in text:", x["id"]); ok = False
    groups = Counter(x["group"] for x in P if "group" in x)
    for g, k in groups.items():
        parts = sorted(x["split_part"] for x in P if x.get("group") == g)
        if parts != [1, 2]: print("SPLIT group incomplete:", g, parts); ok = False
    print("benign_hard per field:", dict(Counter(x["field"] for x in B)))
    print("benign_hard per kind:", dict(Counter(x.get("kind", "?") for x in B)))
    print("benign_hard per language:", dict(Counter(x.get("language", "?") for x in B)))
    inv = lambda s: sum(1 for c in s if unicodedata.category(c) in ("Cf", "Mn", "Co") or 0xE0000 <= ord(c) <= 0xE01EF)
    print(f"texts with invisible/format characters: poisoned {sum(inv(x['text']) > 0 for x in P)}, benign {sum(inv(x['text']) > 0 for x in B)}")
    return ok


if __name__ == "__main__":
    good = True
    for p, f in (("bench/search/eval.json", search_stats), ("bench/poison/corpus.json", poison_stats)):
        try:
            good &= f(p)
        except FileNotFoundError:
            print("missing", p)
    print("ALL CHECKS PASS" if good else "SOME CHECKS FAILED")
    sys.exit(0 if good else 1)
