/* A runtime used in a forked child refuses with a runtime-state error naming
 * the fork, touches no driver, and the parent is unaffected. */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/test_support.h"

static int32_t noop(void *user_data) {
    (void)user_data;
    return 0;
}

#define CHILD_CHECK(cond) \
    do {                  \
        if (!(cond)) _exit(__LINE__ % 200 + 1); \
    } while (0)

static void child_refuses_parent_continues(void **state) {
    tf_runtime *rt = new_runtime();
    void *s = NULL;
    pid_t pid;
    int status = -1;
    (void)state;
    assert_ok(tf_runtime_stream(rt, &s));
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint64_t id = 0;
        if (tfd()) tfd()->tfd_log_clear();
        CHILD_CHECK(tf_with_context(rt, noop, NULL) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(strstr(tf_last_error_message(), "fork") != NULL);
        CHILD_CHECK(strcmp(tf_last_error_operation(), "tf_with_context") == 0);
        CHILD_CHECK(tf_runtime_stream(rt, &s) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(tf_runtime_sync(rt) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(tf_runtime_identity(rt, &id) == TF_OK && id != 0);
        CHILD_CHECK(tf_runtime_release(rt) == TF_OK);
        if (tfd()) CHILD_CHECK(tfd()->tfd_log_count() == 0); /* no driver call at all */
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_ok(tf_with_context(rt, noop, NULL));
    assert_ok(tf_runtime_sync(rt));
    assert_ok(tf_runtime_release(rt));
}

/* A runtime created in the child after the fork is the child's own. */
static void child_can_create_its_own(void **state) {
    pid_t pid;
    int status = -1;
    (void)state;
    REQUIRE_DOUBLE(); /* a real driver cannot be used in a child of an initialized parent */
    {
        tf_runtime *parent = new_runtime();
        pid = fork();
        if (pid == 0) {
            tf_runtime *mine = NULL;
            CHILD_CHECK(tf_runtime_new(0, &mine) == TF_OK);
            CHILD_CHECK(tf_with_context(mine, noop, NULL) == TF_OK);
            CHILD_CHECK(tf_with_context(parent, noop, NULL) == TF_ERROR_RUNTIME_STATE);
            CHILD_CHECK(tf_runtime_release(mine) == TF_OK);
            _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_ok(tf_runtime_release(parent));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(child_refuses_parent_continues),
        TF_TEST(child_can_create_its_own),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
