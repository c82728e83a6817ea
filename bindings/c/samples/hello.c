/* The smallest libotsession program: version, logging, and an error code. */
#include <otsession.h>
#include <stdio.h>

static void on_log(int level, const char *message, void *user_data) {
    (void)user_data;
    printf("log(%d): %s\n", level, message);
}

int main(void) {
    printf("libotsession %s\n", ot_version());
    ot_log_set_callback(on_log, NULL);
    ot_log_set_level(OT_LOG_INFO);
    ot_status s = ot_log_set_level(77);
    printf("ot_log_set_level(77) -> %d: %s\n", s, ot_status_message(s));
    ot_log_set_callback(NULL, NULL);
    return s == OT_ERR_INVALID_PARAM ? 0 : 1;
}
