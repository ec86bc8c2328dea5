#define BOOST_TEST_MODULE net_codec
#include <boost/test/unit_test.hpp>
