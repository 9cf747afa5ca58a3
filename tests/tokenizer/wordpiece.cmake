# WordPiece ("bert") tokenizer tests; included from this folder's CMakeLists.txt.
edgelm_add_test(wordpiece_test
  SOURCES test_vocab.cpp wordpiece_test.cpp
  DEPS edgelm_tokenizer
  LABELS unit)

edgelm_add_test(wordpiece_vectors_test
  SOURCES wordpiece_vectors_test.cpp
  DEPS edgelm_tokenizer edgelm_format
  LABELS golden)
