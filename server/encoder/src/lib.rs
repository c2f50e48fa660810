//! A sentence encoder: a BERT-style model (multilingual-e5-small by default)
//! that turns a text into a unit vector, so that texts of like meaning lie
//! close, in whichever language each is written.
//!
//! The forward pass is written out here over `matrixmultiply`'s matrix
//! product: the ML frameworks that would run it (candle and its model zoo)
//! took four minutes of a cold build, more than the rest of this crate's new
//! dependencies together, for six identical layers of arithmetic.

use std::path::Path;

use matrixmultiply::sgemm;
use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationParams};

/// Longer texts are cut: the model was trained on at most 128 word pieces,
/// and a listing's title and first sentences carry its meaning.
const MAX_TOKENS: usize = 128;

#[derive(Debug, thiserror::Error)]
#[error("the sentence model in {dir}: {reason}")]
pub struct ModelError {
    dir: String,
    reason: String,
}

impl ModelError {
    /// What is wrong with a file that others keep in the model's folder.
    pub fn new(dir: &Path, reason: String) -> Self {
        ModelError { dir: dir.display().to_string(), reason }
    }
}

/// What the model was trained to read before a search (sentence-transformers'
/// `config_sentence_transformers.json`; E5's is `query: `). Empty for models
/// without one. Its `passage` prompt, for long texts searched for, is not
/// used: see [`Encoder::encode_many`].
#[derive(Deserialize, Default)]
struct Prompts {
    #[serde(default)]
    query: String,
}

#[derive(Deserialize)]
struct SentenceTransformersConfig {
    #[serde(default)]
    prompts: Prompts,
}

#[derive(Deserialize)]
struct Config {
    hidden_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    type_vocab_size: usize,
    layer_norm_eps: f32,
}

/// Where one encoding's arithmetic runs: on its caller's thread, or split
/// across rayon's threads (each linear map's outputs in parts).
#[derive(Clone, Copy)]
enum Cores {
    One,
    Every,
}

/// `y = x·Wᵀ + b` with `W` as stored: `out` rows of `inp` weights.
struct Linear {
    w: Vec<f32>,
    b: Vec<f32>,
    inp: usize,
    out: usize,
    /// `w` in half precision, where the processor converts it back (F16C)
    /// and multiplies-adds in 256 bits; empty otherwise. A search's few word
    /// pieces read every weight once, and the weights do not fit in the
    /// cache: reading half the bytes is what makes that faster. (The weights
    /// were 4-bit numbers with a scale before they were f32.)
    half: Vec<u16>,
}

impl Linear {
    fn new(w: Vec<f32>, b: Vec<f32>, inp: usize, out: usize) -> Self {
        #[cfg(target_arch = "x86_64")]
        let half = if halves() {
            // SAFETY: the processor has F16C, AVX2 and FMA, just checked.
            unsafe { to_half(&w) }
        } else {
            Vec::new()
        };
        #[cfg(not(target_arch = "x86_64"))]
        let half = Vec::new();
        Linear { w, b, inp, out, half }
    }

    /// Row `o`'s dot products with four rows: each weight is read (and
    /// converted from half precision) once for the four.
    fn dots(&self, o: usize, rows: [&[f32]; 4]) -> [f32; 4] {
        debug_assert!(rows.iter().all(|r| r.len() == self.inp));
        #[cfg(target_arch = "x86_64")]
        if !self.half.is_empty() {
            // SAFETY: `half` is only filled where the processor has the
            // features; `dots_half` stays within the shortest slice.
            return unsafe { dots_half(rows, &self.half[o * self.inp..(o + 1) * self.inp]) };
        }
        rows.map(|row| similarity(row, &self.w[o * self.inp..(o + 1) * self.inp]))
    }
}

struct Norm {
    gain: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

pub struct Encoder {
    tokenizer: Tokenizer,
    config: Config,
    prompts: Prompts,
    words: Vec<f32>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

impl Encoder {
    /// Loads `dir`'s `config.json`, `tokenizer.json` and `model.safetensors`
    /// (a sentence-transformers model folder), and its prompts if it has any.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let fail = |reason: String| ModelError { dir: dir.display().to_string(), reason };
        let prompts = match std::fs::read_to_string(dir.join("config_sentence_transformers.json")) {
            Ok(text) => {
                serde_json::from_str::<SentenceTransformersConfig>(&text)
                    .map_err(|e| fail(format!("config_sentence_transformers.json: {e}")))?
                    .prompts
            }
            Err(_) => Prompts::default(),
        };
        let config: Config =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).map_err(|e| fail(format!("config.json: {e}")))?)
                .map_err(|e| fail(format!("config.json: {e}")))?;
        if config.max_position_embeddings < MAX_TOKENS
            || config.num_attention_heads == 0
            || !config.hidden_size.is_multiple_of(config.num_attention_heads)
        {
            return Err(fail("config.json: not a BERT encoder this code can run".into()));
        }
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| fail(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
            .map_err(|e| fail(format!("tokenizer.json: {e}")))?;
        let bytes = std::fs::read(dir.join("model.safetensors")).map_err(|e| fail(format!("model.safetensors: {e}")))?;
        let weights = SafeTensors::deserialize(&bytes).map_err(|e| fail(format!("model.safetensors: {e}")))?;
        let tensor = |name: &str, len: usize| -> Result<Vec<f32>, ModelError> {
            // Some exports prefix every name with the architecture's.
            let t = weights.tensor(name).or_else(|_| weights.tensor(&format!("bert.{name}"))).map_err(|e| fail(format!("{name}: {e}")))?;
            if t.dtype() != Dtype::F32 || t.data().len() != len * 4 {
                return Err(fail(format!("{name}: expected {len} f32 values, found {:?} of {:?}", t.shape(), t.dtype())));
            }
            Ok(from_bytes(t.data()))
        };
        let h = config.hidden_size;
        let linear = |name: &str, inp: usize, out: usize| -> Result<Linear, ModelError> {
            Ok(Linear::new(tensor(&format!("{name}.weight"), inp * out)?, tensor(&format!("{name}.bias"), out)?, inp, out))
        };
        let norm = |name: &str| -> Result<Norm, ModelError> {
            Ok(Norm { gain: tensor(&format!("{name}.weight"), h)?, bias: tensor(&format!("{name}.bias"), h)? })
        };
        let vocab = tokenizer.get_vocab_size(true);
        let layers = (0..config.num_hidden_layers)
            .map(|l| {
                let p = format!("encoder.layer.{l}");
                Ok(Layer {
                    query: linear(&format!("{p}.attention.self.query"), h, h)?,
                    key: linear(&format!("{p}.attention.self.key"), h, h)?,
                    value: linear(&format!("{p}.attention.self.value"), h, h)?,
                    attention_out: linear(&format!("{p}.attention.output.dense"), h, h)?,
                    attention_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                    intermediate: linear(&format!("{p}.intermediate.dense"), h, config.intermediate_size)?,
                    output: linear(&format!("{p}.output.dense"), config.intermediate_size, h)?,
                    output_norm: norm(&format!("{p}.output.LayerNorm"))?,
                })
            })
            .collect::<Result<_, ModelError>>()?;
        Ok(Self {
            words: tensor("embeddings.word_embeddings.weight", vocab * h)?,
            positions: tensor("embeddings.position_embeddings.weight", config.max_position_embeddings * h)?,
            token_type: tensor("embeddings.token_type_embeddings.weight", config.type_vocab_size * h)?,
            embedding_norm: norm("embeddings.LayerNorm")?,
            layers,
            tokenizer,
            config,
            prompts,
        })
    }

    /// Whether `word` is a whole word of the model's vocabulary, rather than
    /// pieces it would guess at: as WordPiece stores a word, or as
    /// SentencePiece stores one that starts a word (`▁word`).
    pub fn knows(&self, word: &str) -> bool {
        self.tokenizer.token_to_id(word).is_some() || self.tokenizer.token_to_id(&format!("\u{2581}{word}")).is_some()
    }

    /// A search's meaning (after the model's query prompt).
    pub fn encode_query(&self, text: &str) -> Vec<f32> {
        self.encode(&format!("{}{text}", self.prompts.query))
    }

    /// [`Self::encode_query`] for a search someone waits for: each linear
    /// map split across the cores (rayon's), so a long sentence is read in
    /// half the time on two. Searches at once share the cores rather than
    /// each taking them all. Listings and the scan, encoded by the batch on
    /// every core already, read with one core each.
    pub fn encode_search(&self, text: &str) -> Vec<f32> {
        let text = format!("{}{text}", self.prompts.query);
        rayon::scope(|_| self.encode_on(&text, Cores::Every))
    }

    /// The vector's length.
    pub fn dimensions(&self) -> usize {
        self.config.hidden_size
    }

    /// `text`'s meaning as a unit vector: the mean of the last layer's token
    /// states (sentence-transformers' pooling for this model), normalized.
    pub fn encode(&self, text: &str) -> Vec<f32> {
        self.encode_on(text, Cores::One)
    }

    fn encode_on(&self, text: &str, cores: Cores) -> Vec<f32> {
        let h = self.config.hidden_size;
        // The tokenizer fails only on a broken tokenizer.json, refused at load.
        let ids: Vec<usize> = match self.tokenizer.encode(text, true) {
            Ok(e) => e.get_ids().iter().map(|&i| i as usize).collect(),
            Err(_) => Vec::new(),
        };
        let n = ids.len();
        if n == 0 {
            return vec![0.0; h];
        }
        let mut x = vec![0.0f32; n * h];
        for (t, &id) in ids.iter().enumerate() {
            let row = &mut x[t * h..(t + 1) * h];
            let word = &self.words[id * h..(id + 1) * h];
            let position = &self.positions[t * h..(t + 1) * h];
            for d in 0..h {
                row[d] = word[d] + position[d] + self.token_type[d];
            }
        }
        self.normalize(&mut x, &self.embedding_norm);
        for layer in &self.layers {
            let attended = self.attention(&x, n, layer, cores);
            let mut y = apply(&layer.attention_out, &attended, n, cores);
            add(&mut y, &x);
            self.normalize(&mut y, &layer.attention_norm);
            let inner = apply_then(&layer.intermediate, &y, n, cores, Some(gelu));
            let mut out = apply(&layer.output, &inner, n, cores);
            add(&mut out, &y);
            self.normalize(&mut out, &layer.output_norm);
            x = out;
        }
        let mut mean = vec![0.0f32; h];
        for row in x.chunks_exact(h) {
            add(&mut mean, row);
        }
        let length = mean.iter().map(|v| v * v).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
        mean.iter_mut().for_each(|v| *v /= length);
        mean
    }

    /// Each `(key, text)` with its vector, read as [`Self::encode_query`]
    /// reads (on every core: a first start with thousands of listings takes
    /// minutes on one). Listings are a title and a sentence or two, compared
    /// with searches as paraphrases are, which E5 reads with its query prompt
    /// on both sides; its passage prompt is for long documents. On the search
    /// benchmark's tuning sets, by meaning alone among 2,122 listings, the
    /// query prompt finds 93 of 200 first and 136 in the top 5, the passage
    /// prompt 84 and 128.
    pub fn encode_many<K: Send>(&self, texts: Vec<(K, String)>) -> Vec<(K, Vec<f32>, String)> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let per_core = texts.len().div_ceil(cores).max(1);
        let mut texts = texts.into_iter().peekable();
        let mut chunks = Vec::new();
        while texts.peek().is_some() {
            chunks.push(texts.by_ref().take(per_core).collect::<Vec<_>>());
        }
        std::thread::scope(|scope| {
            let workers: Vec<_> = chunks
                .into_iter()
                .map(|chunk| {
                    scope.spawn(move || {
                        yield_to_calls();
                        chunk.into_iter().map(|(key, text)| (key, self.encode_query(&text), text)).collect::<Vec<_>>()
                    })
                })
                .collect();
            workers.into_iter().flat_map(|w| w.join().expect("encoding does not panic")).collect()
        })
    }

    /// Multi-head self-attention over the `n` token states `x`.
    fn attention(&self, x: &[f32], n: usize, layer: &Layer, cores: Cores) -> Vec<f32> {
        let h = self.config.hidden_size;
        let heads = self.config.num_attention_heads;
        let width = h / heads;
        let (q, k, v) = (apply(&layer.query, x, n, cores), apply(&layer.key, x, n, cores), apply(&layer.value, x, n, cores));
        let mut out = vec![0.0f32; n * h];
        let mut scores = vec![0.0f32; n * n];
        let scale = 1.0 / (width as f32).sqrt();
        for head in 0..heads {
            let offset = head * width;
            // scores = q_head · k_headᵀ, both read in place from the n×h rows.
            unsafe {
                sgemm(
                    n,
                    width,
                    n,
                    scale,
                    q[offset..].as_ptr(),
                    h as isize,
                    1,
                    k[offset..].as_ptr(),
                    1,
                    h as isize,
                    0.0,
                    scores.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
            for row in scores.chunks_exact_mut(n) {
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0;
                for s in row.iter_mut() {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                row.iter_mut().for_each(|s| *s /= sum);
            }
            // out_head = scores · v_head, written into the head's columns.
            unsafe {
                sgemm(
                    n,
                    n,
                    width,
                    1.0,
                    scores.as_ptr(),
                    n as isize,
                    1,
                    v[offset..].as_ptr(),
                    h as isize,
                    1,
                    0.0,
                    out[offset..].as_mut_ptr(),
                    h as isize,
                    1,
                );
            }
        }
        out
    }

    fn normalize(&self, x: &mut [f32], norm: &Norm) {
        let h = self.config.hidden_size;
        for row in x.chunks_exact_mut(h) {
            let mean = row.iter().sum::<f32>() / h as f32;
            let variance = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
            let scale = 1.0 / (variance + self.config.layer_norm_eps).sqrt();
            for ((v, gain), bias) in row.iter_mut().zip(&norm.gain).zip(&norm.bias) {
                *v = (*v - mean) * scale * gain + bias;
            }
        }
    }
}

/// Lowers this thread to the lowest CPU priority, as the sandbox does for slow
/// runs: encoding a backlog must not slow anyone's tool calls. Only for the
/// fresh threads of [`Encoder::encode_all`], which end with their batch.
fn yield_to_calls() {
    // SAFETY: setpriority on this very thread; lowering priority needs no privilege.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
    }
}

/// Up to this many rows (a search's word pieces), [`apply`] reads each weight
/// row once and takes its dot product with every input row: a general matrix
/// product would copy all the weights into its own layout first, which for a
/// short query took longer than the arithmetic.
const FEW_ROWS: usize = 32;

/// `linear` applied to each of the `n` rows of `x`; with [`Cores::Every`],
/// its outputs split across the cores, each reading its share of the
/// weights.
fn apply(linear: &Linear, x: &[f32], n: usize, cores: Cores) -> Vec<f32> {
    apply_then(linear, x, n, cores, None)
}

/// [`apply`], then `activation` on each output (in the same part).
fn apply_then(linear: &Linear, x: &[f32], n: usize, cores: Cores, activation: Option<fn(f32) -> f32>) -> Vec<f32> {
    let parts = match cores {
        Cores::One => 1,
        Cores::Every => rayon::current_num_threads().min(linear.out),
    };
    if parts == 1 {
        return apply_to(linear, x, n, 0..linear.out, activation);
    }
    let ranges: Vec<_> = (0..parts).map(|p| p * linear.out / parts..(p + 1) * linear.out / parts).collect();
    let outs: Vec<Vec<f32>> = ranges.par_iter().map(|range| apply_to(linear, x, n, range.clone(), activation)).collect();
    let mut y = Vec::with_capacity(n * linear.out);
    for t in 0..n {
        for (out, range) in outs.iter().zip(&ranges) {
            y.extend_from_slice(&out[t * range.len()..(t + 1) * range.len()]);
        }
    }
    y
}

/// The outputs `outs` of `linear` for each of the `n` rows of `x`: `n` rows
/// of `outs.len()`.
fn apply_to(linear: &Linear, x: &[f32], n: usize, outs: std::ops::Range<usize>, activation: Option<fn(f32) -> f32>) -> Vec<f32> {
    debug_assert_eq!(x.len(), n * linear.inp);
    let width = outs.len();
    let mut y: Vec<f32> = linear.b[outs.clone()].iter().copied().cycle().take(n * width).collect();
    if n <= FEW_ROWS {
        let rows: Vec<&[f32]> = x.chunks_exact(linear.inp).collect();
        for o in outs.clone() {
            for (block, first) in rows.chunks(4).zip((0..).step_by(4)) {
                // A last block of fewer rows repeats its first; those sums are dropped.
                let four = [0, 1, 2, 3].map(|k| *block.get(k).unwrap_or(&block[0]));
                for (k, sum) in linear.dots(o, four).into_iter().take(block.len()).enumerate() {
                    y[(first + k) * width + o - outs.start] += sum;
                }
            }
        }
    } else {
        // Safety (here and in `attention`): every matrix is a live slice at
        // least as long as its dimensions and strides reach.
        unsafe {
            sgemm(
                n,
                linear.inp,
                width,
                1.0,
                x.as_ptr(),
                linear.inp as isize,
                1,
                // Wᵀ: element (i, o) is w[o * inp + i], from the first output on.
                linear.w[outs.start * linear.inp..].as_ptr(),
                1,
                linear.inp as isize,
                1.0,
                y.as_mut_ptr(),
                width as isize,
                1,
            );
        }
    }
    if let Some(activation) = activation {
        y.iter_mut().for_each(|v| *v = activation(*v));
    }
    y
}

fn add(into: &mut [f32], other: &[f32]) {
    into.iter_mut().zip(other).for_each(|(a, b)| *a += b);
}

/// BERT's GELU, with the error function.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// The error function to within 1.5·10⁻⁷ (Abramowitz and Stegun 7.1.26):
/// `libm::erff`'s exactness cost a tenth of a search's time.
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t * (0.254_829_6 + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    (1.0 - poly * (-a * a).exp()).copysign(x)
}

/// The cosine of two unit vectors (a dot product): a query is compared with
/// every tool, and a short text's every word piece with every weight row.
pub fn similarity(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the processor has both features, just checked.
        return unsafe { similarity_fma(a, b) };
    }
    lanes(a, b)
}

/// [`similarity`] with 256-bit fused multiply-adds, where the processor has
/// them (the build targets every x86-64, so they are not assumed). Written
/// with intrinsics: the compiler's own vectorizing of [`lanes`] changed shape
/// with any change around it. Four sums, since each multiply-add waits for
/// the one before it in its sum.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn similarity_fma(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let whole = n / 32 * 32;
    let mut sums = [_mm256_setzero_ps(); 4];
    for at in (0..whole).step_by(32) {
        for (k, sum) in sums.iter_mut().enumerate() {
            // SAFETY: `at + 8 * k + 8 <= whole <= n`, within both slices.
            let (x, y) = (_mm256_loadu_ps(a.as_ptr().add(at + 8 * k)), _mm256_loadu_ps(b.as_ptr().add(at + 8 * k)));
            *sum = _mm256_fmadd_ps(x, y, *sum);
        }
    }
    add_lanes(sums) + a[whole..n].iter().zip(&b[whole..n]).map(|(x, y)| x * y).sum::<f32>()
}

#[cfg(target_arch = "x86_64")]
fn halves() -> bool {
    std::is_x86_feature_detected!("f16c") && std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

/// `w` in half precision (round to nearest).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "f16c,avx2")]
unsafe fn to_half(w: &[f32]) -> Vec<u16> {
    use std::arch::x86_64::*;
    let mut half = vec![0u16; w.len()];
    for (from, to) in w.chunks(8).zip(half.chunks_mut(8)) {
        let mut eight = [0.0f32; 8];
        eight[..from.len()].copy_from_slice(from);
        let mut out = [0u16; 8];
        // SAFETY: eight f32 in, eight u16 out, both local arrays.
        _mm_storeu_si128(out.as_mut_ptr().cast(), _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(eight.as_ptr())));
        to.copy_from_slice(&out[..to.len()]);
    }
    half
}

/// `row · w` for four rows, with `w` in half precision: each eight weights
/// are loaded and converted once, then multiplied-added into each row's two
/// sums (eight sums in all, so no multiply-add waits for the one before it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "f16c,avx2,fma")]
unsafe fn dots_half(rows: [&[f32]; 4], w: &[u16]) -> [f32; 4] {
    use std::arch::x86_64::*;
    let n = rows.iter().map(|r| r.len()).fold(w.len(), usize::min);
    let whole = n / 16 * 16;
    let mut sums = [[_mm256_setzero_ps(); 2]; 4];
    for at in (0..whole).step_by(16) {
        // SAFETY: `at + 16 <= whole <= n`, within `w` and every row.
        let (lo, hi) =
            (_mm256_cvtph_ps(_mm_loadu_si128(w.as_ptr().add(at).cast())), _mm256_cvtph_ps(_mm_loadu_si128(w.as_ptr().add(at + 8).cast())));
        for (sum, row) in sums.iter_mut().zip(rows) {
            sum[0] = _mm256_fmadd_ps(_mm256_loadu_ps(row.as_ptr().add(at)), lo, sum[0]);
            sum[1] = _mm256_fmadd_ps(_mm256_loadu_ps(row.as_ptr().add(at + 8)), hi, sum[1]);
        }
    }
    // The last (fewer than 16) weights, eight at a time, padded with zeros.
    for at in (whole..n).step_by(8) {
        let len = (n - at).min(8);
        let mut h = [0u16; 8];
        h[..len].copy_from_slice(&w[at..at + len]);
        let y = _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr().cast()));
        for (sum, row) in sums.iter_mut().zip(rows) {
            let mut x = [0.0f32; 8];
            x[..len].copy_from_slice(&row[at..at + len]);
            sum[0] = _mm256_fmadd_ps(_mm256_loadu_ps(x.as_ptr()), y, sum[0]);
        }
    }
    sums.map(|sum| add_lanes([sum[0], sum[1], _mm256_setzero_ps(), _mm256_setzero_ps()]))
}

/// The sum of every lane of four vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn add_lanes(sums: [std::arch::x86_64::__m256; 4]) -> f32 {
    use std::arch::x86_64::*;
    let sum = _mm256_add_ps(_mm256_add_ps(sums[0], sums[1]), _mm256_add_ps(sums[2], sums[3]));
    let half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps::<1>(sum));
    let quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
    _mm_cvtss_f32(_mm_add_ss(quarter, _mm_shuffle_ps::<0b01>(quarter, quarter)))
}

/// A dot product summed in eight lanes, which the compiler turns into vector
/// instructions (a single running sum must stay in order).
fn lanes(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let rest: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a8.zip(b8) {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    lanes.iter().sum::<f32>() + rest
}

/// A vector as stored: little-endian f32s.
pub fn to_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian f32s: stored vectors, and the model's weights.
pub fn from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model `make test` installs (scripts/bootstrap.sh); these tests fail
    /// rather than pass vacuously without it.
    fn model_dir() -> std::path::PathBuf {
        std::env::var_os("TOOLSHED_EMBEDDING_MODEL")
            .expect("TOOLSHED_EMBEDDING_MODEL names the sentence model's folder (scripts/env.sh sets it; scripts/bootstrap.sh installs it)")
            .into()
    }

    #[test]
    fn texts_of_like_meaning_lie_close_in_any_language_and_unlike_ones_apart() {
        let encoder = Encoder::load(&model_dir()).unwrap();
        let english = encoder.encode_query("convert 250 euros to dollars");
        let chinese = encoder.encode_query("把250欧元换算成美元");
        let room = encoder.encode_query("book a meeting room for tomorrow");
        assert_eq!(english.len(), 384);
        assert!((similarity(&english, &english) - 1.0).abs() < 1e-5);
        // What sentence-transformers makes of this model (query prompts on both): 0.908 and 0.770.
        assert!((similarity(&english, &chinese) - 0.908).abs() < 0.01, "{}", similarity(&english, &chinese));
        assert!((similarity(&english, &room) - 0.770).abs() < 0.01, "{}", similarity(&english, &room));
    }

    #[test]
    fn a_search_split_across_the_cores_reads_as_one_core_does() {
        let encoder = Encoder::load(&model_dir()).unwrap();
        let short = "Welche Rechnungen sind diesen Monat überfällig?";
        // Past `FEW_ROWS` word pieces, the matrix product's path.
        let long = "When a supplier's invoice arrives without a purchase order number, find the order it most likely \
                    belongs to by amount, date and supplier, and tell me how sure that match is before I approve it";
        // Three parts, so that neither half is a special case (the machine may have two cores, or one).
        let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        for text in [short, long] {
            assert_eq!(three.install(|| encoder.encode_search(text)), encoder.encode_query(text), "{text}");
        }
    }

    #[test]
    fn searches_and_the_texts_searched_for_are_read_with_the_query_prompt() {
        let encoder = Encoder::load(&model_dir()).unwrap();
        let description = "Converts an amount between two currencies at the day's ECB reference rate.";
        let listing = encoder.encode_many(vec![((), description.to_owned())]).remove(0);
        assert_eq!(listing.2, description, "the text is kept as given");
        assert_eq!(listing.1, encoder.encode(&format!("query: {description}")));
        assert_eq!(encoder.encode_query("fx"), encoder.encode("query: fx"));
    }

    #[test]
    fn a_few_rows_and_many_rows_get_the_same_linear_map() {
        let (inp, out) = (45, 7);
        let value = |i: usize| ((i * 7919) % 101) as f32 / 50.0 - 1.0;
        let linear = Linear::new((0..inp * out).map(value).collect(), (0..out).map(|i| value(i + 3)).collect(), inp, out);
        let x: Vec<f32> = (0..(FEW_ROWS + 1) * inp).map(|i| value(i + 11)).collect();
        let many = apply(&linear, &x, FEW_ROWS + 1, Cores::One);
        // Whole blocks of four rows, and a last block of three.
        for rows in [FEW_ROWS, 7] {
            let few = apply(&linear, &x[..rows * inp], rows, Cores::One);
            assert_eq!(few.len(), rows * out);
            for (a, b) in few.iter().zip(&many) {
                // Few rows may read the weights in half precision: four digits agree.
                assert!((a - b).abs() < 1e-3 * b.abs().max(1.0), "{a} vs {b}");
            }
        }
        assert!((similarity(&x[..inp], &x[..inp]) - x[..inp].iter().map(|v| v * v).sum::<f32>()).abs() < 1e-4);
    }

    #[test]
    fn the_error_function_is_within_three_ten_millionths() {
        for (x, erf_x) in [(0.0, 0.0), (0.1, 0.112_462_92), (0.5, 0.520_499_9), (1.0, 0.842_700_8), (2.0, 0.995_322_3), (4.0, 0.999_999_98)]
        {
            assert!((erf(x) - erf_x).abs() < 3e-7, "erf({x}) = {}", erf(x));
            assert!((erf(-x) + erf_x).abs() < 3e-7, "erf is odd");
        }
    }

    #[test]
    fn stored_vectors_survive_their_bytes() {
        let v = vec![0.5, -1.25, f32::MIN_POSITIVE, 3.0e7];
        assert_eq!(from_bytes(&to_bytes(&v)), v);
    }

    #[test]
    fn long_and_empty_texts_encode_without_failing() {
        let encoder = Encoder::load(&model_dir()).unwrap();
        let long = "word ".repeat(5_000);
        assert_eq!(encoder.encode(&long).len(), 384);
        assert_eq!(encoder.encode("").len(), 384);
    }

    #[test]
    fn the_vocabulary_knows_words_not_gibberish() {
        let encoder = Encoder::load(&model_dir()).unwrap();
        assert!(encoder.knows("laptop") && encoder.knows("meeting") && encoder.knows("computer"));
        // Some real words are pieces only: the listings' own words cover those (`semantic`).
        assert!(!encoder.knows("invoice") && !encoder.knows("payroll"));
        assert!(!encoder.knows("zzzz") && !encoder.knows("qqqq") && !encoder.knows("xqzv"));
    }

    #[test]
    fn a_missing_model_is_a_clear_error() {
        let err = Encoder::load(Path::new("/nonexistent/model")).err().unwrap().to_string();
        assert!(err.starts_with("the sentence model in /nonexistent/model: config.json:"), "{err}");
    }
}
