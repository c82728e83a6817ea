/* libpulse's asynchronous API (Debian libpulse-dev), which also reaches PipeWire through pipewire-pulse. */
#include <pulse/pulseaudio.h>
