/* The C ABI's conventions, checked from C: every entry point refuses bad
 * arguments with the documented status instead of crashing. */
#include <otsession.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
#define EXPECT(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static int log_calls = 0;
static void *seen_user_data = NULL;
static void count_log(int level, const char *message, void *user_data) {
    (void)level; (void)message;
    log_calls++;
    seen_user_data = user_data;
}

static void test_global(void) {
    EXPECT(strcmp(ot_status_message(OT_OK), "ok") == 0);
    EXPECT(strstr(ot_status_message(OT_ERR_AUTHORIZATION_FAILURE), "authorization") != NULL);
    EXPECT(strcmp(ot_status_message(-5), "unknown status code") == 0);
    EXPECT(ot_log_set_level(-1) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_log_set_level(6) == OT_ERR_INVALID_PARAM);
    int marker = 7;
    EXPECT(ot_log_set_callback(count_log, &marker) == OT_OK);
    EXPECT(ot_log_set_level(OT_LOG_INFO) == OT_OK);
    EXPECT(log_calls == 1 && seen_user_data == &marker);
    EXPECT(ot_log_set_callback(NULL, NULL) == OT_OK);
    EXPECT(ot_log_set_level(OT_LOG_WARN) == OT_OK);
    EXPECT(log_calls == 1);
}

int main(void) {
    test_global();
    if (failures) { fprintf(stderr, "abi_test: %d failed\n", failures); return 1; }
    printf("abi_test: all passed\n");
    return 0;
}
