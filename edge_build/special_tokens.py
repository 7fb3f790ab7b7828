"""The vocabulary's reserved tokens, shared by the vocabulary learner, the tokenizer and calibration."""

PAD, UNK = "[PAD]", "[UNK]"
#: Token ids 0 and 1: padding must be 0 so that zero-padded ids mean "nothing here".
RESERVED_TOKENS = (PAD, UNK)
PAD_ID, UNK_ID = RESERVED_TOKENS.index(PAD), RESERVED_TOKENS.index(UNK)
#: What starts a WordPiece that continues a word ("##ing").
JOINER = "##"
