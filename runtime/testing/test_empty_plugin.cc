// A shared library that registers no actor type (runtime/actor_library_test).
extern "C" int troupe_test_empty_plugin_answer() { return 42; }
