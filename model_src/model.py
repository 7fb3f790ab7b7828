"""The classifier: TF-IDF-weighted tokens and runs of adjacent tokens, normalized, into a linear layer.

edge-build calls ``build_model`` with the vocabulary size, the number of classes, the
sequence length and the train split's token ids (``train_ids``, ``[texts,
sequence_length]`` int32, 0 = padding), plus every key of ``[model]`` in
``hparams.toml`` as a keyword argument, so a new hyperparameter is a new keyword
argument here and a key there. The model takes int32 token ids ``[batch,
sequence_length]`` and returns unnormalized logits ``[batch, num_classes]``.

What the model computes, for a text:

1. Its features: every token and, unless ``kind = "bag"`` (the tokens alone), every
   run of two and three adjacent tokens (``ngram_order``) among the first
   ``ngram_window`` (128), each order hashed into a table of its own in int32
   (below). ``kind = "ngram_char_bag"`` (the default; ``"ngram_bag"`` without them)
   adds the character 1- to 4-grams (``character_order``) each token of more than
   one character spells (fastText-style): a piece that starts
   a word is spelled with a ``<`` before it, a ``##`` piece without its joiner, so
   "colour" and "neighbour" share "our" and "ou". A piece's n-grams are fixed by
   the vocabulary: a constant int32 table, built here from the ``vocabulary`` and
   looked up with one GATHER, gives them per id, and their rows are shared by every
   token that spells them, among the first ``ngram_window`` tokens. Trained, they
   fold into one row per token (``SpelledBag``), so the exported model looks up a
   row per position, not one per n-gram. N-grams across two pieces of a word are
   not taken.
2. One row per feature, weighted by the feature's IDF on the train split
   (scikit-learn's smooth IDF, ``ln((1 + texts) / (1 + texts holding it)) + 1``),
   computed here from ``train_ids``.
3. Each weight divided by the text's IDF norm, the square root of the sum of its
   features' squared weights (a TF-IDF vector's L2 norm when no feature repeats),
   then the weighted rows summed. The norm depends on the text, not on the
   learned rows.
4. ``embedding_dim = "classes"`` (the default): a row holds one number per class,
   and a bias per class gives the logits, so the model is a logistic regression
   on the TF-IDF features (``regularization_c`` is scikit-learn's ``C``: the rows'
   squared L2 norm over ``2 * C * texts`` is added to the mean loss). A number
   instead: rows of that many numbers, then a dense layer.

N-grams: a pair's key is ``left * vocab_size + right``, exact below
``vocab_size**2 < 2**31``; a triple's is ``(pair key mod m) * vocab_size + third``
with ``m = 2**31 // vocab_size``, so that every int32 step stays below 2**31 (TF
Lite's integer overflow is undefined behaviour, not wraparound). The key times
``min(last, 1)``, modulo the order's buckets, is the row. Padding is trailing, so
a run that reaches it ends with [PAD] and lands in bucket 0, whose weight is zero
like [PAD]'s: padding adds nothing (a real n-gram that hashes to 0 is lost, 1 in
the buckets). ``ngram_buckets = "auto"`` sizes each table from the data: the
smallest power of two of at least eight buckets per distinct n-gram seen twice in
train (about one in nine of them then shares its bucket; ``model.feature_tables``,
kept in the train log, has the measured share), the largest table halved until all
rows the exported model holds fit ``max_model_mb`` of INT8 (a byte a number, and one
for its weight). Every op is a TF Lite builtin
that tflite-runtime 2.14 and ai-edge-litert 2.3 run (STRIDED_SLICE, MUL, ADD,
MINIMUM, FLOOR_MOD, GATHER, SUM, RSQRT), and the integer ops stay int32 in the
full-integer INT8 model.

What decided it (issue 40). On Chinese reviews, validation accuracy [test in
brackets; the classical baseline: 0.8469 on test], a linear model trained with
Keras on the build's own ids: the previous model (rows of 64 learned numbers whose
sum was L2-normalized, then a dense layer) peaked in its first epoch, 0.835 [0.815];
logistic regression on tokens and pairs without IDF 0.838 [0.838], with IDF 0.848
[0.842] (exact pairs seen twice), 0.845 [0.847] (hashed into 524,288 buckets),
0.849 [0.839] (28,672 buckets); C about 1.8 instead of 0.9: 0.849 [0.846];
adding triples seen twice: 0.853 [0.856], the only variant above the baseline
there, where the baseline's character trigrams are what the tokens' pairs miss
(BERT's tokenization makes each CJK character a token). ``regularization_c``:
with triples, C about 1.8, 4 and 8 gave 0.853, 0.855 and 0.857 on Chinese reviews'
validation split; on the movie-review snippets C 2, 8 and 20 gave 0.781, 0.785
and 0.786 (baseline 0.8017 on test: 0.778, 0.796, 0.796), and a linear model on
ids and pairs was best at C = 10 on the TREC questions' and the tweets'
validation splits too, so 8. The characters, at C 8 and rate 0.005: TREC questions
validation 0.794 without them, 0.818 with them (test 0.772 and 0.807, baseline
0.835), movie-review snippets 0.784 and 0.795 (test 0.789 and 0.799, baseline
0.802), so they are the default. ``character_order`` 4, not 3 (a linear model on the
build's splits, validation [test]): movie-review snippets 0.800 [0.799] against 0.789
[0.787], tweets 0.776 [0.758] against 0.772 [0.755], TREC questions 0.842 [0.824]
against 0.840 [0.820]; 5 gave 0.796 and 0.840 on the snippets and TREC. A piece of one
character spells nothing: on Chinese reviews, where every CJK character is one, that
linear model gave validation 0.851 [0.833] with their spellings, 0.853 [0.841] without,
as without any characters (0.853 [0.844]). ``[training] learning_rate`` 0.02, not 0.005:
at 0.005 the small corpora were still improving at their 15th and last epoch
(TREC validation 0.794; 0.816 at 0.02), and Chinese reviews gave validation 0.865
[0.853] at 0.02. ``benchmarks/README.md`` has the build's own figures per corpus.

Why this shape, measured on BBC News here (earlier issues):
- Padding is left out by its weight, 0, not by a mask of its own. The model
  before issue 40 multiplied a mask over ``[batch, 512, 64]``, most of its INT8
  time on tflite-runtime; the weights' multiply here is over a row of a few
  classes per position.
- The norm is ``RSQRT`` of a sum, not a DIV: tflite-runtime 2.14 has no int8 DIV
  kernel. Its floor is 1e-4, so an all-padding input gives zeros, not NaN.
"""

import keras
import numpy as np
import tensorflow as tf
from keras import ops

PAD_ID = 0
KINDS = ("bag", "ngram_bag", "ngram_char_bag")
#: ``left * vocab_size + right`` must fit in int32.
LARGEST_PAIRED_VOCABULARY = 46340
INT32_MAX = 2**31 - 1
#: Buckets per distinct n-gram seen twice in train, for ``ngram_buckets = "auto"``.
BUCKETS_PER_NGRAM = 8
#: Layer names by n-gram order: ``bigram_ids``, ``trigram_embedding`` ...
NGRAM_NAMES = {2: "bigram", 3: "trigram"}
#: Ids 0 and 1 are [PAD] and [UNK] (edge-build's reserved tokens): they spell nothing.
RESERVED_IDS = (0, 1)
#: What continues a word in a WordPiece vocabulary ("##ing"), and the mark of a piece that starts one.
JOINER, WORD_START = "##", "<"
#: Texts per chunk when counting the character n-grams' document frequencies: memory stays flat.
CHUNK = 1024


def ngram_keys(token_ids: np.ndarray, vocab_size: int, order: int, exact: bool = False) -> np.ndarray:
    """Each run of ``order`` adjacent ids as a number, 0 where it reaches padding: what ``HashedNgrams`` computes before its last modulo.

    ``exact``: the plain base-``vocab_size`` number (int64) instead of the model's int32 one,
    which keeps every step below 2**31 by reducing the key modulo ``key_modulus`` before
    each further id (a pair's key is exact either way).
    """
    count = token_ids.shape[1] - order + 1
    keys = token_ids[:, :count].astype(np.int64)
    for offset in range(1, order):
        if offset > 1 and not exact:
            keys %= key_modulus(vocab_size)
        keys = keys * vocab_size + token_ids[:, offset : offset + count]
    return keys * np.minimum(token_ids[:, order - 1 :], 1)


def key_modulus(vocab_size: int) -> int:
    """The largest modulus ``m`` with ``(m - 1) * vocab_size + (vocab_size - 1) <= 2**31 - 1``."""
    return (INT32_MAX + 1) // vocab_size


class HashedNgrams(keras.layers.Layer):
    """Token ids ``[batch, L]`` -> bucket ids ``[batch, L - order + 1]`` of each run of ``order`` adjacent ids; 0 where it reaches padding."""

    def __init__(self, vocab_size: int, order: int, buckets: int, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.order, self.buckets = vocab_size, order, buckets

    def call(self, token_ids):
        count = token_ids.shape[1] - self.order + 1
        keys = token_ids[:, :count]
        for offset in range(1, self.order):
            if offset > 1:
                keys = ops.mod(keys, key_modulus(self.vocab_size))
            keys = keys * self.vocab_size + token_ids[:, offset : offset + count]
        # Padding is trailing: a run that reaches [PAD] ends with it, so its last id decides.
        return ops.mod(keys * ops.minimum(token_ids[:, self.order - 1 :], 1), self.buckets)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "order": self.order, "buckets": self.buckets}


def document_frequencies(features: np.ndarray, rows: int) -> np.ndarray:
    """How many texts (rows of ``features``) hold each feature id at least once."""
    ordered = np.sort(features, axis=1)
    first = np.ones(ordered.shape, dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    return np.bincount(ordered[first], minlength=rows)


def idf_weights(features: np.ndarray, rows: int, texts: int | None = None, frequencies: np.ndarray | None = None) -> np.ndarray:
    """Each feature id's smooth IDF over the texts of ``features`` (or given ``frequencies`` of ``texts``); 0 for padding's id."""
    texts = max(len(features) if texts is None else texts, 1)
    frequencies = document_frequencies(features, rows) if frequencies is None else frequencies
    weights = np.log((1 + texts) / (1 + frequencies)) + 1
    weights[PAD_ID] = 0
    return weights.astype(np.float32)


def piece_character_ngrams(vocabulary: list[str], longest: int = 4) -> np.ndarray:
    """Each token's distinct character 1- to ``longest``-grams as ids from 1 (0: none), ``[tokens, most grams a token has]`` int32.

    A piece that starts a word is spelled with ``WORD_START`` before it, so "<pl" (a word
    starting "pl") differs from "pl" inside one; a ``##`` piece without its joiner. The
    reserved tokens spell nothing, and neither does a piece of one character: its
    n-grams would be itself, which its token's row already is, so spelled again it
    would count twice in the norm (every CJK character is such a piece: on Chinese
    reviews that cost a linear model 1.1 points of test accuracy).
    """
    ids: dict[str, int] = {}
    spelled = [[] for _ in RESERVED_IDS]
    for token in vocabulary[len(RESERVED_IDS) :]:
        continuation = token.startswith(JOINER) and len(token) > len(JOINER)
        piece = token[len(JOINER) :] if continuation else token
        text = piece if continuation else WORD_START + piece
        spelled_grams = (text[start : start + n] for n in range(1, longest + 1) for start in range(len(text) - n + 1))
        grams = dict.fromkeys(spelled_grams) if len(piece) > 1 else {}
        spelled.append([ids.setdefault(gram, len(ids) + 1) for gram in grams])
    table = np.zeros((len(vocabulary), max(map(len, spelled), default=1) or 1), dtype=np.int32)
    for index, grams in enumerate(spelled):
        table[index, : len(grams)] = grams
    return table


def character_idf(table: np.ndarray, train_ids: np.ndarray) -> np.ndarray:
    """Each character n-gram's smooth IDF: the train texts spelling it somewhere, counted in chunks of ``CHUNK`` texts."""
    rows = int(table.max()) + 1
    frequencies = np.zeros(rows, dtype=np.int64)
    for start in range(0, len(train_ids), CHUNK):
        chunk = table[train_ids[start : start + CHUNK]]
        frequencies += document_frequencies(chunk.reshape(len(chunk), -1), rows)
    return idf_weights(None, rows, len(train_ids), frequencies)


def holding(values: np.ndarray):
    """An initializer that gives ``values``: tables the data fixed, kept as non-trainable variables."""
    return lambda shape, dtype=None: ops.convert_to_tensor(values)


class WeightedBag(keras.layers.Layer):
    """Feature ids ``[batch, L]`` -> their rows ``[batch, L, width]`` and their fixed weights ``[batch, L]``.

    The weights are a non-trainable variable, not a constant: a SavedModel stores a
    variable once, a constant once in every signature.
    """

    def __init__(self, weights: np.ndarray, width: int, l2: float, initializer: str, **kwargs):
        super().__init__(**kwargs)
        self.feature_weights = np.asarray(weights, dtype=np.float32)
        self.width, self.l2, self.initializer = width, l2, initializer

    def build(self, input_shape):
        rows = len(self.feature_weights)
        # No mask and no constraint for padding: its weight is 0, so its row, whatever it holds, adds nothing and gets no gradient.
        self.embeddings = self.add_weight(
            shape=(rows, self.width), initializer=self.initializer, regularizer=keras.regularizers.L2(self.l2), name="embeddings"
        )
        self.weights_of_rows = self.add_weight(shape=(rows,), initializer=holding(self.feature_weights), trainable=False, name="idf")

    def call(self, ids):
        return tf.gather(self.embeddings, ids), tf.gather(self.weights_of_rows, ids)


class SpelledBag(WeightedBag):
    """Token ids ``[batch, L]`` -> per position, the IDF-weighted rows of the character n-grams its token spells, as one row and one weight.

    A token's n-grams (a constant int32 table ``[tokens, most grams a token has]``, 0
    for none) come to one feature of weight ``s = sqrt(sum of their weights squared)``
    and row ``sum(weight * row) / s``: the same contribution to the norm and to the
    sum as the n-grams one by one. Training looks the n-grams up per position (their
    rows are shared by every token that spells them); once trained weights are
    loaded, ``fold`` computes each token's row once, and the model looks up one row
    per position, as the token bag does (issue 40: on BBC News the per-position
    lookups of 47 n-grams were most of the INT8 model's time).
    """

    def __init__(self, table: np.ndarray, weights: np.ndarray, width: int, l2: float, initializer: str, **kwargs):
        super().__init__(weights, width, l2, initializer, **kwargs)
        self.table, self.folded = table, False
        # s per token: padding's, the reserved tokens' and any token spelling nothing is 0.
        self.token_weights = np.sqrt(np.sum(np.square(self.feature_weights[table]), axis=1)).astype(np.float32)

    def build(self, input_shape):
        super().build(input_shape)
        self.spellings = self.add_weight(shape=self.table.shape, dtype="int32", initializer=holding(self.table), trainable=False, name="spellings")
        self.weights_of_tokens = self.add_weight(
            shape=self.token_weights.shape, initializer=holding(self.token_weights), trainable=False, name="token_weights"
        )
        self.folded_rows = self.add_weight(shape=(len(self.table), self.width), initializer="zeros", trainable=False, name="folded_rows")

    def call(self, token_ids):
        token_weights = tf.gather(self.weights_of_tokens, token_ids)
        if self.folded:
            return tf.gather(self.folded_rows, token_ids), token_weights
        grams = tf.gather(self.spellings, token_ids)
        weighted = tf.gather(self.embeddings, grams) * ops.expand_dims(tf.gather(self.weights_of_rows, grams), -1)
        # RSQRT, not a DIV: tflite-runtime 2.14 has no int8 DIV kernel.
        return ops.sum(weighted, axis=2) * ops.expand_dims(ops.rsqrt(ops.maximum(token_weights * token_weights, 1e-12)), -1), token_weights

    def fold(self) -> None:
        """Each token's row from the trained n-gram rows: the lookup per position becomes one row per token."""
        rows, weights = self.embeddings.numpy(), self.weights_of_rows.numpy()
        summed = np.sum(rows[self.table] * weights[self.table][..., None], axis=1)
        self.folded_rows.assign(summed / np.maximum(self.weights_of_tokens.numpy(), 1e-6)[:, None])
        self.folded = True

    def load_own_variables(self, store):
        super().load_own_variables(store)
        self.fold()


class NormalizedSum(keras.layers.Layer):
    """The bags' rows, each times its weight over the text's norm (the square root of every weight squared), summed.

    Normalized before the sum, not after: every position then adds at most a row's
    size whatever the text's length, so the full-integer model's int8 sum keeps its
    levels for short texts and long ones alike. Normalized after it, the longest
    calibration texts set the sum's scale: the TREC questions' 6-class INT8 Tasks
    model agreed with the Keras model on 0.983 of the validation split. The multiply
    is over ``[batch, L, width]``, a width of a few classes. All-padding texts give zeros.
    """

    def call(self, bags):
        squared_norm = sum(ops.sum(weights * weights, axis=1, keepdims=True) for _, weights in bags)
        scale = ops.rsqrt(ops.maximum(squared_norm, 1e-4))
        return sum(ops.sum(rows * ops.expand_dims(weights * scale, -1), axis=1) for rows, weights in bags)


class ClassBias(keras.layers.Layer):
    """The logistic regression's intercepts."""

    def build(self, input_shape):
        self.bias = self.add_weight(shape=(input_shape[-1],), initializer="zeros", name="bias")

    def call(self, inputs):
        return inputs + self.bias


def require_whole_number(name: str, value, smallest: int, largest: int | None = None, word: str | None = None) -> None:
    """``value`` is a whole number in range (``word``: the one string also allowed, checked by the caller)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < smallest or (largest is not None and value > largest):
        allowed = f"from {smallest} to {largest}" if largest is not None else f"of {smallest} or more"
        raise ValueError(f"{name} = {value!r}: must be a whole number {allowed}" + (f', or "{word}"' if word else ""))


def require_positive_number(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} = {value!r}: must be a number above 0")


def row_width(embedding_dim, num_classes: int) -> int:
    if embedding_dim == "classes":
        return num_classes
    require_whole_number("embedding_dim", embedding_dim, 1, word="classes")
    return embedding_dim


def wanted_buckets(exact_keys: np.ndarray) -> int:
    """The smallest power of two holding ``BUCKETS_PER_NGRAM`` buckets per distinct n-gram seen twice."""
    _, counts = np.unique(exact_keys[exact_keys > 0], return_counts=True)
    return 1 << int(np.ceil(np.log2(max(BUCKETS_PER_NGRAM * int(np.sum(counts >= 2)), 2))))


def fit_budget(wanted: dict[int, int], token_rows: int, width: int, max_model_mb: float) -> dict[int, int]:
    """``wanted`` buckets per order, the largest table halved until every shipped row fits ``max_model_mb``.

    A row ships as ``width`` int8 numbers and its int8 weight; ``token_rows`` are the rows
    besides the n-grams (the tokens', and their folded characters' for ``ngram_char_bag``).
    """
    affordable = int(max_model_mb * 1e6) // (width + 1) - token_rows
    if affordable < 2 * len(wanted):
        raise ValueError(f"max_model_mb = {max_model_mb}: holds no n-gram tables beside {token_rows} token rows of {width + 1} bytes")
    buckets = dict(wanted)
    while sum(buckets.values()) > affordable:
        largest = max(buckets, key=lambda order: (buckets[order], order))
        buckets[largest] //= 2
    return buckets


def table_summary(exact_keys: np.ndarray, model_keys: np.ndarray, buckets: int) -> dict:
    """How the train split's n-grams fill the buckets: those seen twice, and the share of them that shares a bucket."""
    keys, first, counts = np.unique(exact_keys[exact_keys > 0], return_index=True, return_counts=True)
    repeated_buckets = model_keys[exact_keys > 0][first[counts >= 2]] % buckets
    _, inverse, per_bucket = np.unique(repeated_buckets, return_inverse=True, return_counts=True)
    return {
        "buckets": buckets,
        "distinct": int(len(keys)),
        "seen_twice": int(len(repeated_buckets)),
        "colliding_share": round(float(np.mean(per_bucket[inverse] > 1)) if len(repeated_buckets) else 0.0, 4),
    }


def build_model(
    vocab_size: int,
    num_classes: int,
    sequence_length: int,
    train_ids: np.ndarray,
    vocabulary: list[str] | None = None,
    kind: str = "ngram_char_bag",
    embedding_dim="classes",
    ngram_order: int = 3,
    ngram_buckets="auto",
    ngram_window: int = 128,
    character_order: int = 4,
    max_model_mb: float = 16.0,
    regularization_c: float = 8.0,
    dropout: float = 0.0,
) -> keras.Model:
    if kind not in KINDS:
        raise ValueError(f"kind = {kind!r}: expected one of {', '.join(KINDS)}")
    require_positive_number("regularization_c", regularization_c)
    require_positive_number("max_model_mb", max_model_mb)
    width = row_width(embedding_dim, num_classes)
    l2 = 1 / (2 * regularization_c * max(len(train_ids), 1))
    # A logistic regression starts at zero (a row no train text reaches stays there); rows before a dense layer need to differ.
    initializer = "zeros" if embedding_dim == "classes" else "uniform"
    token_ids = keras.Input(shape=(sequence_length,), dtype="int32", name="input_ids")
    bags = [WeightedBag(idf_weights(train_ids, vocab_size), width, l2, initializer, name="embedding")(token_ids)]
    tables = {"token_rows": vocab_size, "row_width": width, "ngrams": {}}
    # What the exported model holds besides n-grams: the tokens' rows, and their folded characters' for ngram_char_bag.
    token_rows = vocab_size * (2 if kind == "ngram_char_bag" else 1)
    if kind in ("ngram_bag", "ngram_char_bag"):
        if vocab_size > LARGEST_PAIRED_VOCABULARY:
            raise ValueError(f"kind = 'ngram_bag' pairs token ids in int32: vocab_size must be at most {LARGEST_PAIRED_VOCABULARY}, not {vocab_size}")
        require_whole_number("ngram_order", ngram_order, 2, max(NGRAM_NAMES))
        require_whole_number("ngram_window", ngram_window, ngram_order)
        orders = range(2, ngram_order + 1)
        # N-grams of the first ngram_window tokens only: their cost grows with it, and a long text's topic is in its words.
        leading_train = train_ids[:, :ngram_window]
        exact = {order: ngram_keys(leading_train, vocab_size, order, exact=True) for order in orders}
        if ngram_buckets == "auto":
            buckets = fit_budget({order: wanted_buckets(exact[order]) for order in orders}, token_rows, width, max_model_mb)
        else:
            require_whole_number("ngram_buckets", ngram_buckets, 2, INT32_MAX, word="auto")  # bucket 0 is padding's; FLOOR_MOD runs in int32
            buckets = dict.fromkeys(orders, ngram_buckets)
        leading = token_ids[:, :ngram_window] if ngram_window < sequence_length else token_ids
        for order in orders:
            name = NGRAM_NAMES[order]
            ngram_ids = HashedNgrams(vocab_size, order, buckets[order], name=f"{name}_ids")(leading)
            model_keys = ngram_keys(leading_train, vocab_size, order)
            weights = idf_weights(model_keys % buckets[order], buckets[order])
            bags.append(WeightedBag(weights, width, l2, initializer, name=f"{name}_embedding")(ngram_ids))
            tables["ngrams"][name] = table_summary(exact[order], model_keys, buckets[order])
    if kind == "ngram_char_bag":
        if vocabulary is None or len(vocabulary) != vocab_size:
            raise ValueError(f"kind = 'ngram_char_bag' spells the {vocab_size} tokens: build_model needs their vocabulary")
        require_whole_number("character_order", character_order, 1)
        spellings = piece_character_ngrams(vocabulary, character_order)
        weights = character_idf(spellings, leading_train)
        # Of the first ngram_window tokens too: a long text's characters add little its words do not, at a cost per position.
        bags.append(SpelledBag(spellings, weights, width, l2, initializer, name="character_embedding")(leading))
        tables["characters"] = {"ngrams": len(weights) - 1, "most_per_token": int(spellings.shape[1])}
    pooled = NormalizedSum(name="bag_of_features")(bags)
    pooled = keras.layers.Dropout(dropout, name="dropout")(pooled)
    if embedding_dim == "classes":
        logits = ClassBias(name="logits")(pooled)
    else:
        logits = keras.layers.Dense(num_classes, name="logits")(pooled)
    model = keras.Model(token_ids, logits, name="text_classifier")
    rows = token_rows + sum(table["buckets"] for table in tables["ngrams"].values())
    tables["int8_table_mb"] = round(rows * (width + 1) / 1e6, 3)
    model.feature_tables = tables
    return model
