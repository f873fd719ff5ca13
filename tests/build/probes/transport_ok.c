#include "transport/transport.h"
#include "util/log.h"
#include "vmmc/vmmc.h"
