// Compiles the public header as C++11 and calls through it.
#include <otsession.h>
#include <cstdio>

int main() {
    std::printf("C++: libotsession %s, %s\n", ot_version(), ot_status_message(OT_ERR_NOT_CONNECTED));
    return 0;
}
