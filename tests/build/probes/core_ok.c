#include "core/core.h"
#include "transport/transport.h"
#include "util/log.h"
