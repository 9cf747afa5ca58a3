# Byte-level BPE tokenizer (bpe.*, pretokenize.*, byte_unicode.*): unit tests on hand-built
# vocabularies, and llama.cpp's test vectors for the gpt2-model vocabularies in shared/vocab.
edgelm_add_test(bpe_test
  SOURCES test_vocab.cpp bpe_test.cpp
  DEPS edgelm_tokenizer
  LABELS unit)

edgelm_add_test(bpe_vectors_test
  SOURCES bpe_vectors_test.cpp
  DEPS edgelm_tokenizer edgelm_format
  LABELS golden)
