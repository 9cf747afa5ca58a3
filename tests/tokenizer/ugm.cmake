# Unigram ("t5") tokenizer tests; included from this folder's CMakeLists.txt.
edgelm_add_test(ugm_test
  SOURCES test_vocab.cpp ugm_test.cpp
  DEPS edgelm_tokenizer
  LABELS unit)

edgelm_add_test(xlmr_vocab_test
  SOURCES xlmr_vocab_test.cpp
  DEPS edgelm_tokenizer edgelm_format
  LABELS golden)
