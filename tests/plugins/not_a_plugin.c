/* A valid shared library that is not a Tessera plugin: it exports no entry points. */
int tessera_test_not_a_plugin_answer(void) { return 42; }
